"""Write a GPT-2 124M-sized checkpoint with random weights in the Hugging Face layout
(model.safetensors + config.json): n_layer 12, n_head 12, n_embd 768, n_positions 1024,
vocab 50304 (GPT-2's 50257 padded as nanoGPT pads it), Conv1D weights [in, out], tied lm_head.
Weights ~ N(0, 0.02) (GPT-2's init), LayerNorm weights 1. For benchmarks only; not committed
(~500 MB). Needs numpy only.

  /usr/bin/python3 tools/make_gpt2_bench_model.py [-o bench/out/gpt2-124m]
"""
import argparse
import json
import os
import struct

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, H, C, S, V = 12, 12, 768, 1024, 50304


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-o', '--output', default=os.path.join(REPO, 'bench', 'out', 'gpt2-124m'))
    ap.add_argument('--seed', type=int, default=1337)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    shapes = {'wte.weight': (V, C), 'wpe.weight': (S, C), 'ln_f.weight': (C,), 'ln_f.bias': (C,)}
    for l in range(L):
        p = 'h.%d.' % l
        shapes.update({p + 'ln_1.weight': (C,), p + 'ln_1.bias': (C,), p + 'attn.c_attn.weight': (C, 3 * C),
                       p + 'attn.c_attn.bias': (3 * C,), p + 'attn.c_proj.weight': (C, C), p + 'attn.c_proj.bias': (C,),
                       p + 'ln_2.weight': (C,), p + 'ln_2.bias': (C,), p + 'mlp.c_fc.weight': (C, 4 * C),
                       p + 'mlp.c_fc.bias': (4 * C,), p + 'mlp.c_proj.weight': (4 * C, C), p + 'mlp.c_proj.bias': (C,)})
    os.makedirs(args.output, exist_ok=True)
    header, offset = {'__metadata__': {'format': 'pt'}}, 0
    names = sorted(shapes)
    for n in names:
        size = int(np.prod(shapes[n])) * 4
        header[n] = {'dtype': 'F32', 'shape': list(shapes[n]), 'data_offsets': [offset, offset + size]}
        offset += size
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * (-len(h) % 8)
    with open(os.path.join(args.output, 'model.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for n in names:
            shape = shapes[n]
            if n.endswith(('ln_1.weight', 'ln_2.weight', 'ln_f.weight')):
                a = np.ones(shape, dtype='<f4')
            elif len(shape) == 1:
                a = np.zeros(shape, dtype='<f4')
            else:
                a = (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype('<f4')
            f.write(a.tobytes())
    with open(os.path.join(args.output, 'config.json'), 'w') as f:
        json.dump({'model_type': 'gpt2', 'activation_function': 'gelu_new', 'n_layer': L, 'n_head': H, 'n_embd': C,
                   'n_positions': S, 'vocab_size': V, 'layer_norm_epsilon': 1e-5}, f, indent=2)
    print('wrote %s: %.1f M parameters' % (args.output, offset / 4 / 1e6))


if __name__ == '__main__':
    main()
