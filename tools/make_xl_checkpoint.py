"""A GPT-2 XL-shaped checkpoint with random weights, to measure the converter's peak memory.

  /usr/bin/python3 tools/make_xl_checkpoint.py [-o bench/out/xl.safetensors]

nanoGPT key names (transformer.h.N...., nn.Linear [out, in]), no model_args: convert with
--n-head 25. n_layer 48, n_embd 1600, n_head 25, vocab_size 50257, block_size 1024: 1.56 B
parameters, 6.2 GB of f32, written one tensor at a time (the script holds one tensor).
"""
import argparse
import json
import os
import struct

import numpy as np

L, C, V, S = 48, 1600, 50257, 1024


def tensors():
    yield 'transformer.wte.weight', (V, C)
    yield 'transformer.wpe.weight', (S, C)
    for i in range(L):
        p = f'transformer.h.{i}.'
        for n, shape in [('ln_1.weight', (C,)), ('ln_1.bias', (C,)), ('attn.c_attn.weight', (3 * C, C)),
                         ('attn.c_attn.bias', (3 * C,)), ('attn.c_proj.weight', (C, C)), ('attn.c_proj.bias', (C,)),
                         ('ln_2.weight', (C,)), ('ln_2.bias', (C,)), ('mlp.c_fc.weight', (4 * C, C)),
                         ('mlp.c_fc.bias', (4 * C,)), ('mlp.c_proj.weight', (C, 4 * C)), ('mlp.c_proj.bias', (C,))]:
            yield p + n, shape
    yield 'transformer.ln_f.weight', (C,)
    yield 'transformer.ln_f.bias', (C,)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('-o', '--out', default='bench/out/xl.safetensors')
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.out) or '.', exist_ok=True)
    header, at = {}, 0
    for name, shape in tensors():
        n = int(np.prod(shape)) * 4
        header[name] = {'dtype': 'F32', 'shape': list(shape), 'data_offsets': [at, at + n]}
        at += n
    h = json.dumps(header).encode()
    rng = np.random.default_rng(0)
    with open(args.out, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for name, shape in tensors():
            f.write((rng.standard_normal(shape, dtype=np.float32) * 0.02).tobytes())
    print(f'{args.out}: {at / 1e9:.2f} GB of f32, {at // 4 / 1e9:.3f} B parameters')


if __name__ == '__main__':
    main()
