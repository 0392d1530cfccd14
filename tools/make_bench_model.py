"""Write a random-weight checkpoint of the lecture model in its FULL configuration
(n_layer 6, n_head 6, n_embd 384, block_size 256, vocab from sorted(set(tinyshakespeare)) = 65),
perturbed as the fixtures are so it is not degenerate (noise std scaled by sqrt(32 / n_embd),
so the logits spread as the n_embd-32 fixtures' do: std ~1, not ~4). For benchmarks only; not committed.

  /usr/bin/python3 tools/make_bench_model.py [-o bench/out/gptpy_full.pt] [--text PATH]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptpy_model import GPTLanguageModel  # noqa: E402
from make_fixtures import PERTURB_STD, perturb  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-o', '--output', default=os.path.join(REPO, 'bench', 'out', 'gptpy_full.pt'))
    ap.add_argument('--text', default=os.path.join(REPO, '..', 'shared', 'data', 'tinyshakespeare.txt'))
    ap.add_argument('--seed', type=int, default=1337)
    args = ap.parse_args()
    with open(args.text, encoding='utf-8') as f:
        vocab_size = len(sorted(set(f.read())))
    torch.manual_seed(args.seed)
    model = GPTLanguageModel(vocab_size, n_embd=384, n_head=6, n_layer=6, block_size=256)
    perturb(model, args.seed + 1, PERTURB_STD * (32 / 384) ** 0.5)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    torch.save(model.state_dict(), args.output)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.output}: vocab {vocab_size}, {n / 1e6:.2f} M parameters")


if __name__ == '__main__':
    main()
