"""Write a random-weight nanoGPT checkpoint the size of GPT-2 124M (n_layer 12, n_head 12,
n_embd 768, block_size 1024, vocab 50257, biases, tied lm_head, nanoGPT's init) and a
vocabulary text of 50257 distinct code points (U+0100 on) so `ember convert --vocab-text`
can give it a char tokenizer. For benchmarks only; not committed.

  /usr/bin/python3 tools/make_bench_nanogpt.py -o OUT/gpt2_124m.pt --vocab OUT/gpt2_124m.vocab.txt
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT, GPTConfig  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-o', '--output', required=True)
    ap.add_argument('--vocab', required=True, help='where to write the vocabulary text')
    ap.add_argument('--seed', type=int, default=1337)
    args = ap.parse_args()
    vocab_size = 50257
    torch.manual_seed(args.seed)
    model_args = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, bias=True, vocab_size=vocab_size, dropout=0.0)
    model = GPT(GPTConfig(**model_args))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    torch.save({'model': model.state_dict(), 'model_args': model_args, 'iter_num': 0}, args.output)
    with open(args.vocab, 'w', encoding='utf-8') as f:
        f.write(''.join(chr(0x100 + i) for i in range(vocab_size)))  # below the surrogates (U+D800)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.output}: vocab {vocab_size}, {n / 1e6:.2f} M parameters")


if __name__ == '__main__':
    main()
