"""LoRA fine-tuning fixtures from PyTorch autograd (deterministic; run with /usr/bin/python3).

  /usr/bin/python3 tools/make_lora_fixtures.py [--repo ROOT]

Reads the committed fixture models (tests/fixtures/gptpy/model.pt: ReLU, own lm_head;
tests/fixtures/nanogpt/ckpt.pt: GELU, biases, tied lm_head) and writes
tests/fixtures/lora/{gptpy,nanogpt}.json:

  {"arch", "rank", "alpha", "batch", "seq", "x": [B*T ids], "y": [B*T ids],
   "params": [P floats]          LoRA values, layout of schema/adapter.fbs
   "bases": {"f32"|"f16"|"int8": {"loss": float, "grads": [P floats]}},
   "adamw": {"lr", "weight_decay", "betas", "eps", "clip",      (f32 base only)
             "steps": [{"loss", "grad_norm", "params": [P floats]}, ...]}}

Each base is the fixture's weights exactly as the .ember file of that dtype holds them: f32;
f16 = every 2-D weight rounded with .half(); int8 = every 2-D weight quantized as
converter/quantize.cpp does (groups of 64 along a row, scale = absmax / 127,
q = round-half-even(w / scale)) and dequantized q * scale. Biases and LayerNorms stay f32.
On the int8 base the frozen linears also see their input quantized to int8 as ember's kernel
does (fake_quant_rows, straight-through gradient); the LoRA branch sees it unquantized.
The forward is written out functionally on the canonical layout (fused qkv, q | k | v, heads
in order) and checked against the source module's logits (f32, LoRA B = 0) before use.
AdamW steps: torch.nn.utils.clip_grad_norm_ then torch.optim.AdamW, on the same batch.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptpy_model import GPTLanguageModel  # noqa: E402
from nanogpt_model import load_nanogpt  # noqa: E402

TARGETS = ['qkv', 'proj', 'fc', 'fc2']
GROUP = 64


def canonical_gptpy(m, cfg):
    W = {'wte': m.token_embedding_table.weight, 'wpe': m.position_embedding_table.weight,
         'ln_f.weight': m.ln_f.weight, 'ln_f.bias': m.ln_f.bias,
         'lm_head.weight': m.lm_head.weight, 'lm_head.bias': m.lm_head.bias}
    for i, b in enumerate(m.blocks):
        heads = b.sa.heads
        W[f'h.{i}.qkv.weight'] = torch.cat([torch.cat([h.query.weight for h in heads]),
                                            torch.cat([h.key.weight for h in heads]),
                                            torch.cat([h.value.weight for h in heads])])
        W[f'h.{i}.proj.weight'], W[f'h.{i}.proj.bias'] = b.sa.proj.weight, b.sa.proj.bias
        W[f'h.{i}.fc.weight'], W[f'h.{i}.fc.bias'] = b.ffwd.net[0].weight, b.ffwd.net[0].bias
        W[f'h.{i}.fc2.weight'], W[f'h.{i}.fc2.bias'] = b.ffwd.net[2].weight, b.ffwd.net[2].bias
        W[f'h.{i}.ln_1.weight'], W[f'h.{i}.ln_1.bias'] = b.ln1.weight, b.ln1.bias
        W[f'h.{i}.ln_2.weight'], W[f'h.{i}.ln_2.bias'] = b.ln2.weight, b.ln2.bias
    return {k: v.detach().clone() for k, v in W.items()}


def canonical_nanogpt(m, cfg):
    t = m.transformer
    W = {'wte': t.wte.weight, 'wpe': t.wpe.weight, 'ln_f.weight': t.ln_f.weight, 'ln_f.bias': t.ln_f.bias,
         'lm_head.weight': t.wte.weight, 'lm_head.bias': None}
    for i, b in enumerate(t.h):
        W[f'h.{i}.ln_1.weight'], W[f'h.{i}.ln_1.bias'] = b.ln_1.weight, b.ln_1.bias
        W[f'h.{i}.qkv.weight'], W[f'h.{i}.qkv.bias'] = b.attn.c_attn.weight, b.attn.c_attn.bias
        W[f'h.{i}.proj.weight'], W[f'h.{i}.proj.bias'] = b.attn.c_proj.weight, b.attn.c_proj.bias
        W[f'h.{i}.ln_2.weight'], W[f'h.{i}.ln_2.bias'] = b.ln_2.weight, b.ln_2.bias
        W[f'h.{i}.fc.weight'], W[f'h.{i}.fc.bias'] = b.mlp.c_fc.weight, b.mlp.c_fc.bias
        W[f'h.{i}.fc2.weight'], W[f'h.{i}.fc2.bias'] = b.mlp.c_proj.weight, b.mlp.c_proj.bias
    return {k: (None if v is None else v.detach().clone()) for k, v in W.items()}


def quantize_int8(w, group=GROUP):
    rows, cols = w.shape
    out = torch.empty_like(w)
    for g0 in range(0, cols, group):
        blk = w[:, g0:g0 + group]
        scale = blk.abs().amax(dim=1, keepdim=True) / 127.0
        q = torch.where(scale > 0, torch.round(blk / torch.where(scale > 0, scale, torch.ones_like(scale))),
                        torch.zeros_like(blk)).clamp(-127, 127)
        out[:, g0:g0 + group] = q * scale
    return out


def as_dtype(W, dtype):
    if dtype == 'f32':
        return W
    out = {}
    for k, v in W.items():
        if v is None or v.dim() != 2:
            out[k] = v
        elif dtype == 'f16':
            out[k] = v.half().float()
        else:
            out[k] = quantize_int8(v)
    return out


def fake_quant_rows(x, group):
    """The int8 kernel's activation quantization (kernels/cpu/linear.cpp): each row in groups of
    `group`, scale = absmax / 127, q = round-half-even(x * (127 / absmax)), value q * scale.
    Straight-through in the backward (the rounding counts as identity), as ember trains."""
    parts = []
    for g0 in range(0, x.shape[-1], group):
        blk = x[..., g0:g0 + group]
        amax = blk.detach().abs().amax(dim=-1, keepdim=True)
        inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
        q = torch.round(blk.detach() * inv) * (amax / 127.0)
        parts.append(blk + (q - blk).detach())
    return torch.cat(parts, dim=-1)


def forward(W, cfg, lora, idx, scale, quant_act=False):
    """logits [B, T, V] of the canonical model with LoRA (lora[(layer, target)] = (A, B)).
    quant_act: the int8 base's linears see their input quantized (fake_quant_rows); LoRA does not."""
    B, T = idx.shape
    C, H = cfg['n_embd'], cfg['n_head']
    hs = C // H
    act = F.relu if cfg['act'] == 'relu' else F.gelu

    def lin(x, name, layer=None, target=None):
        w = W[name + '.weight']
        xin = fake_quant_rows(x, min(GROUP, w.shape[1])) if quant_act else x
        y = F.linear(xin, w, W.get(name + '.bias'))
        if layer is not None:
            A, Bm = lora[(layer, target)]
            y = y + scale * F.linear(F.linear(x, A), Bm)
        return y

    def ln(x, name):
        return F.layer_norm(x, (C,), W[name + '.weight'], W.get(name + '.bias'), 1e-5)

    x = W['wte'][idx] + W['wpe'][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(cfg['n_layer']):
        h = ln(x, f'h.{i}.ln_1')
        qkv = lin(h, f'h.{i}.qkv', i, 'qkv')
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, H, hs).transpose(1, 2)
        k = k.view(B, T, H, hs).transpose(1, 2)
        v = v.view(B, T, H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (hs ** -0.5)
        att = F.softmax(att.masked_fill(~mask, float('-inf')), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + lin(y, f'h.{i}.proj', i, 'proj')
        h = ln(x, f'h.{i}.ln_2')
        x = x + lin(act(lin(h, f'h.{i}.fc', i, 'fc')), f'h.{i}.fc2', i, 'fc2')
    return lin(ln(x, 'ln_f'), 'lm_head')


def make_lora(cfg, rank, gen):
    C, Fh = cfg['n_embd'], 4 * cfg['n_embd']
    shapes = {'qkv': (C, 3 * C), 'proj': (C, C), 'fc': (C, Fh), 'fc2': (Fh, C)}
    lora, flat = {}, []
    for i in range(cfg['n_layer']):
        for t in TARGETS:
            fin, fout = shapes[t]
            A = (torch.rand(rank, fin, generator=gen) * 2 - 1) / math.sqrt(fin)
            B = torch.randn(fout, rank, generator=gen) * 0.05
            A.requires_grad_(True)
            B.requires_grad_(True)
            lora[(i, t)] = (A, B)
            flat += [A, B]
    return lora, flat


def flat_values(tensors):
    # the shortest decimal that reads back as the same float32
    return [float(repr(v)) for t in tensors for v in t.detach().reshape(-1).numpy().astype(np.float32)]


def case(arch, model, W, cfg, seq, batch, seed):
    rank, alpha = 4, 8.0
    scale = alpha / rank
    gen = torch.Generator().manual_seed(seed)
    lora, flat = make_lora(cfg, rank, gen)
    idx = torch.randint(0, cfg['vocab_size'], (batch, seq + 1), generator=gen)
    x, y = idx[:, :-1], idx[:, 1:]
    # the functional forward is the source module's (f32, adapters off)
    with torch.no_grad():
        zero = {k: (a, torch.zeros_like(b)) for k, (a, b) in lora.items()}
        ref = model(x)[0] if arch == 'gptpy' else model(x)
        got = forward(W, cfg, zero, x, scale)
        err = (ref - got).abs().max().item()
        assert err < 1e-5, f'{arch}: functional forward differs from the module by {err}'
    out = {'arch': arch, 'rank': rank, 'alpha': alpha, 'batch': batch, 'seq': seq,
           'x': x.reshape(-1).tolist(), 'y': y.reshape(-1).tolist(), 'params': flat_values(flat), 'bases': {}}
    for dtype in ['f32', 'f16', 'int8']:
        Wd = as_dtype(W, dtype)
        for p in flat:
            p.grad = None
        logits = forward(Wd, cfg, lora, x, scale, quant_act=(dtype == 'int8'))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        out['bases'][dtype] = {'loss': loss.item(), 'grads': flat_values([p.grad for p in flat])}
    # AdamW: two steps on the same batch, clipping active on the first
    params = [p.detach().clone().requires_grad_(True) for p in flat]
    it = iter(params)
    lora2 = {k: (next(it), next(it)) for k in lora}
    lr, wd, eps, betas = 1e-2, 0.1, 1e-8, (0.9, 0.999)
    g0 = math.sqrt(sum(float((g ** 2).sum()) for g in [torch.tensor(out['bases']['f32']['grads'])]))
    clip = 0.5 * g0
    opt = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    steps = []
    for _ in range(2):
        opt.zero_grad()
        logits = forward(W, cfg, lora2, x, scale)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        steps.append({'loss': loss.item(), 'grad_norm': float(norm), 'params': flat_values(params)})
    out['adamw'] = {'lr': lr, 'weight_decay': wd, 'betas': list(betas), 'eps': eps, 'clip': clip, 'steps': steps}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repo', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    args = ap.parse_args()
    fx = os.path.join(args.repo, 'tests', 'fixtures')
    torch.manual_seed(0)

    exp = json.load(open(os.path.join(fx, 'gptpy', 'expected.json')))
    c = exp['config']
    m = GPTLanguageModel(c['vocab_size'], c['n_embd'], c['n_head'], c['n_layer'], c['block_size'])
    m.load_state_dict(torch.load(os.path.join(fx, 'gptpy', 'model.pt')))
    m.eval()
    cfg = dict(c, act='relu')
    cases = {'gptpy': case('gptpy', m, canonical_gptpy(m, cfg), cfg, seq=12, batch=3, seed=11)}

    nm, ckpt = load_nanogpt(os.path.join(fx, 'nanogpt', 'ckpt.pt'))
    a = ckpt['model_args']
    cfg = {'n_layer': a['n_layer'], 'n_head': a['n_head'], 'n_embd': a['n_embd'], 'block_size': a['block_size'],
           'vocab_size': a['vocab_size'], 'act': 'gelu'}
    cases['nanogpt'] = case('nanogpt', nm, canonical_nanogpt(nm, cfg), cfg, seq=cfg['block_size'], batch=2, seed=12)

    os.makedirs(os.path.join(fx, 'lora'), exist_ok=True)
    for name, d in cases.items():
        path = os.path.join(fx, 'lora', name + '.json')
        with open(path, 'w') as f:
            json.dump(d, f, separators=(',', ':'))
        print(path, 'loss f32 %.6f f16 %.6f int8 %.6f' % tuple(d['bases'][k]['loss'] for k in ['f32', 'f16', 'int8']))


if __name__ == '__main__':
    main()
