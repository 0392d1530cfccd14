"""Checks bench/llama/gguf_write.py against PyTorch: writes each source as f16 and q8_0 GGUF,
has llama.cpp (bench/out/llama/llama_bench --logits) evaluate a fixed id sequence in one batch,
and compares its logits [T, V] with PyTorch's for the same weights.

PyTorch side, written independently of the writer's layout code:
  - hf: GPT-2's math on the safetensors tensors by their Hugging Face names (Conv1D: x @ W + b,
    tanh GELU), a few lines below;
  - nanogpt: tools/nanogpt_model.GPT with its exact GELU replaced by the tanh GELU llama.cpp's
    gpt2 graph hard-wires;
  - gptpy: tools/gptpy_model.GPTLanguageModel with ReLU replaced by tanh GELU and lm_head's bias
    zeroed (llama.cpp's gpt2 graph has neither ReLU nor an output bias; see gguf_write.py).
Measure: NMSE = sum((llama - torch)^2) / sum(torch^2) over all T x V logits, and the share of
positions whose argmax agrees. Tolerances: f16 NMSE <= 1e-5 (f16 weights and ggml's f16
activations in the f16 dot products, relative error ~1e-3 per value; seen: 6e-7 on the fixtures);
q8_0 NMSE <= 2e-3 (int8 weights and activations, relative error ~1e-2 per value; seen: 4e-4).
A swapped q/k/v order or a missing transpose gives NMSE near 1. Exit status 1 when one fails.

  /usr/bin/python3 bench/llama/check.py KIND:SRC[:N_HEAD] ...    (KIND hf | nanogpt | gptpy)
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, 'tools'))
sys.path.insert(0, HERE)
from gguf_write import read_safetensors  # noqa: E402

DRIVER = os.path.join(REPO, 'bench', 'out', 'llama', 'llama_bench')
TOL = {'f16': 1e-5, 'q8_0': 2e-3}


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def torch_hf(src, ids):
    """GPT-2 forward on the Hugging Face tensors: [T] ids -> [T, V] logits."""
    with open(os.path.join(os.path.dirname(src), 'config.json')) as f:
        cfg = json.load(f)
    w = {k.replace('transformer.', ''): torch.from_numpy(np.array(v)) for k, v in read_safetensors(src).items()}
    H, eps, T = cfg['n_head'], cfg.get('layer_norm_epsilon', 1e-5), len(ids)
    ln = lambda x, p: F.layer_norm(x, x.shape[-1:], w[p + '.weight'], w[p + '.bias'], eps)
    x = w['wte.weight'][ids] + w['wpe.weight'][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg['n_layer']):
        p = 'h.%d.' % l
        q, k, v = (ln(x, p + 'ln_1') @ w[p + 'attn.c_attn.weight'] + w[p + 'attn.c_attn.bias']).split(x.shape[1], 1)
        q, k, v = (t.view(T, H, -1).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        y = F.softmax(att.masked_fill(~mask, float('-inf')), -1) @ v
        x = x + y.transpose(0, 1).reshape(T, -1) @ w[p + 'attn.c_proj.weight'] + w[p + 'attn.c_proj.bias']
        h = gelu_tanh(ln(x, p + 'ln_2') @ w[p + 'mlp.c_fc.weight'] + w[p + 'mlp.c_fc.bias'])
        x = x + h @ w[p + 'mlp.c_proj.weight'] + w[p + 'mlp.c_proj.bias']
    return ln(x, 'ln_f') @ w.get('lm_head.weight', w['wte.weight']).T


class TanhGELU(torch.nn.Module):
    def forward(self, x):
        return gelu_tanh(x)


def torch_nanogpt(src, ids):
    from nanogpt_model import GPT, GPTConfig
    ck = torch.load(src, map_location='cpu')
    m = GPT(GPTConfig(**ck['model_args']))
    m.load_state_dict({k.replace('_orig_mod.', ''): v for k, v in ck['model'].items()})
    for blk in m.transformer.h:
        blk.mlp.gelu = TanhGELU()
    return m.eval()(torch.tensor([ids]))[0]


def torch_gptpy(src, ids, n_head):
    from gptpy_model import GPTLanguageModel
    sd = torch.load(src, map_location='cpu')
    V, C = sd['token_embedding_table.weight'].shape
    L = len({k.split('.')[1] for k in sd if k.startswith('blocks.')})
    m = GPTLanguageModel(V, C, n_head, L, sd['position_embedding_table.weight'].shape[0])
    m.load_state_dict(sd)
    for blk in m.blocks:
        blk.ffwd.net[1] = TanhGELU()
    with torch.no_grad():
        m.lm_head.bias.zero_()
    return m.eval()(torch.tensor([ids]))[0][0]


def main():
    ok = True
    out = os.path.join(REPO, 'bench', 'out', 'llama')
    for spec in sys.argv[1:]:
        kind, src, *rest = spec.split(':')
        n_head = int(rest[0]) if rest else 0
        with torch.no_grad():
            if kind == 'hf':
                ctx = json.load(open(os.path.join(os.path.dirname(src), 'config.json')))['n_positions']
            elif kind == 'nanogpt':
                ctx = torch.load(src, map_location='cpu')['model_args']['block_size']
            else:
                ctx = torch.load(src, map_location='cpu')['position_embedding_table.weight'].shape[0]
            T = min(ctx, 64)
            ids = [(i * 7 + 3) % 60 for i in range(T)]  # ids below every vocabulary here (65 chars, 297 BPE)
            ref = {'hf': lambda: torch_hf(src, ids), 'nanogpt': lambda: torch_nanogpt(src, ids),
                   'gptpy': lambda: torch_gptpy(src, ids, n_head)}[kind]().double().numpy()
        for dtype in ('f16', 'q8_0'):
            gguf = os.path.join(out, 'check.%s.%s.gguf' % (kind, dtype))
            cmd = [sys.executable, os.path.join(HERE, 'gguf_write.py'), src, '--type', dtype, '-o', gguf]
            subprocess.run(cmd + (['--n-head', str(n_head)] if n_head else []), check=True, stdout=subprocess.DEVNULL)
            dump = gguf + '.logits'
            subprocess.run([DRIVER, '-m', gguf, '-t', '2', '--logits', ','.join(map(str, ids)), dump], check=True)
            got = np.fromfile(dump, dtype=np.float32).reshape(ref.shape).astype(np.float64)
            nmse = float(((got - ref) ** 2).sum() / (ref ** 2).sum())
            agree = float((got.argmax(1) == ref.argmax(1)).mean())
            passed = nmse <= TOL[dtype]
            ok &= passed
            print(json.dumps({'check': kind, 'src': os.path.relpath(src, REPO), 'dtype': dtype, 'T': T,
                              'V': ref.shape[1], 'nmse': nmse, 'tol': TOL[dtype], 'max_abs': float(np.abs(got - ref).max()),
                              'ref_max_abs': float(np.abs(ref).max()), 'argmax_agree': agree, 'pass': passed}))
            os.remove(gguf)
            os.remove(dump)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
