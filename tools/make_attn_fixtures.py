"""Capture the softmax attention weights (`wei`) of the committed fixture models for
`ember attn`'s tests (deterministic; run with Debian's /usr/bin/python3).

  /usr/bin/python3 tools/make_attn_fixtures.py [--repo ROOT]

The models are the ones the other fixtures made (tools/make_fixtures.py,
tools/make_gpt2_fixtures.py), run by the reference PyTorch modules (tools/gptpy_model.py,
tools/nanogpt_model.py) in eval mode. `wei` is taken from the forward itself: while the model
runs, torch.nn.functional.softmax is wrapped and every call's result kept; attention is the
only softmax inside forward, called in order block 0 head 0.., block 1 .. (gpt.py: one call
per Head, wei = softmax(masked_fill(q @ k^T * head_size**-0.5, tril == 0, -inf)); nanoGPT: one
call per block over [B, n_head, T, T]).

Writes tests/fixtures/attn/expected.json:
  {"<name>": {"checkpoint", "vocab_flag" ("text" | "meta" | "tokenizer"), "vocab",
              "prompt" (char models; null for the BPE one), "ids" [T],
              "n_layer", "n_head", "T",
              "wei": [n_layer][n_head][T * T] row-major, row t = query t (zeros above the diagonal)}}
for gptpy (gpt.py, tests/fixtures/gptpy/model.pt), nanogpt (char nanoGPT,
tests/fixtures/nanogpt/ckpt.pt) and gpt2 (the GPT-2-shaped nanoGPT checkpoint with the tiny
byte-level BPE, tests/fixtures/gpt2/nanogpt/ckpt.pt; its ids are drawn at random from the
tokenizer's 297 ids, no BPE encoding in Python).
"""
import argparse
import json
import os
import random
import sys

import torch
import torch.nn.functional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptpy_model import GPTLanguageModel  # noqa: E402
from nanogpt_model import load_nanogpt  # noqa: E402

GPTPY_PROMPT = 'The lazy dog, and'    # 17 chars; cropped to block_size 16 below
NANOGPT_PROMPT = 'Speak, speak! No'   # 16 chars
GPT2_TOKENIZER_SIZE = 297


class SoftmaxRecorder:
    """Within `with`, torch.nn.functional.softmax keeps a detached copy of each result."""

    def __init__(self):
        self.calls = []
        self._orig = None

    def __enter__(self):
        self._orig = torch.nn.functional.softmax

        def recording(*args, **kwargs):
            out = self._orig(*args, **kwargs)
            self.calls.append(out.detach().clone())
            return out

        torch.nn.functional.softmax = recording
        return self

    def __exit__(self, *exc):
        torch.nn.functional.softmax = self._orig


def capture(model, ids, n_layer, n_head, per_head):
    """wei [n_layer][n_head][T, T] of one forward over ids."""
    with torch.no_grad(), SoftmaxRecorder() as rec:
        model(torch.tensor([ids], dtype=torch.long))
    T = len(ids)
    if per_head:  # gpt.py: one [1, T, T] per head
        assert len(rec.calls) == n_layer * n_head, len(rec.calls)
        return [[rec.calls[l * n_head + h][0] for h in range(n_head)] for l in range(n_layer)]
    assert len(rec.calls) == n_layer, len(rec.calls)  # nanoGPT: one [1, H, T, T] per block
    out = [[rec.calls[l][0, h] for h in range(n_head)] for l in range(n_layer)]
    assert out[0][0].shape == (T, T)
    return out


def entry(checkpoint, vocab_flag, vocab, prompt, ids, wei):
    n_layer, n_head, T = len(wei), len(wei[0]), len(ids)
    for layer in wei:
        for w in layer:
            assert torch.allclose(w.sum(dim=-1), torch.ones(T), atol=1e-6)
            assert float(torch.triu(w, diagonal=1).abs().max()) == 0.0
    return {
        'checkpoint': checkpoint, 'vocab_flag': vocab_flag, 'vocab': vocab, 'prompt': prompt,
        'ids': ids, 'n_layer': n_layer, 'n_head': n_head, 'T': T,
        'wei': [[[float(x) for x in w.reshape(-1)] for w in layer] for layer in wei],
    }


def char_ids(text, vocab_text):
    stoi = {ch: i for i, ch in enumerate(sorted(set(vocab_text)))}
    return [stoi[ch] for ch in text]


def gptpy(repo):
    fx = os.path.join(repo, 'tests', 'fixtures')
    cfg = json.load(open(os.path.join(fx, 'gptpy', 'expected.json')))['config']
    model = GPTLanguageModel(cfg['vocab_size'], cfg['n_embd'], cfg['n_head'], cfg['n_layer'], cfg['block_size'])
    model.load_state_dict(torch.load(os.path.join(fx, 'gptpy', 'model.pt'), map_location='cpu'))
    model.eval()
    prompt = GPTPY_PROMPT[-cfg['block_size']:]
    ids = char_ids(prompt, open(os.path.join(fx, 'gptpy', 'vocab.txt'), encoding='utf-8').read())
    wei = capture(model, ids, cfg['n_layer'], cfg['n_head'], per_head=True)
    return entry('gptpy/model.pt', 'text', 'gptpy/vocab.txt', prompt, ids, wei)


def nanogpt(repo):
    fx = os.path.join(repo, 'tests', 'fixtures')
    model, ckpt = load_nanogpt(os.path.join(fx, 'nanogpt', 'ckpt.pt'))
    a = ckpt['model_args']
    ids = char_ids(NANOGPT_PROMPT, open(os.path.join(fx, 'nanogpt', 'vocab.txt'), encoding='utf-8').read())
    assert len(ids) <= a['block_size']
    wei = capture(model, ids, a['n_layer'], a['n_head'], per_head=False)
    return entry('nanogpt/ckpt.pt', 'meta', 'nanogpt/meta.pkl', NANOGPT_PROMPT, ids, wei)


def gpt2(repo):
    fx = os.path.join(repo, 'tests', 'fixtures')
    model, ckpt = load_nanogpt(os.path.join(fx, 'gpt2', 'nanogpt', 'ckpt.pt'))
    a = ckpt['model_args']
    rng = random.Random(15)
    ids = [rng.randrange(GPT2_TOKENIZER_SIZE) for _ in range(a['block_size'] - 3)]  # T = 13
    wei = capture(model, ids, a['n_layer'], a['n_head'], per_head=False)
    return entry('gpt2/nanogpt/ckpt.pt', 'tokenizer', 'gpt2/tiny_tokenizer', None, ids, wei)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--repo', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    out = {'gptpy': gptpy(args.repo), 'nanogpt': nanogpt(args.repo), 'gpt2': gpt2(args.repo)}
    out_dir = os.path.join(args.repo, 'tests', 'fixtures', 'attn')
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, 'expected.json')
    with open(path, 'w') as f:
        json.dump(out, f, separators=(',', ':'))
        f.write('\n')
    for k, v in out.items():
        print(f"{path}: {k}: n_layer {v['n_layer']} n_head {v['n_head']} T {v['T']}")


if __name__ == '__main__':
    main()
