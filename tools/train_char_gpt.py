#!/usr/bin/python3
"""Train the lecture's char-level GPT on a text file on the CPU and save its state_dict.

Run with Debian's python3-torch (and libopenblas0-pthread installed):
  /usr/bin/python3 tools/train_char_gpt.py ../shared/data/tinyshakespeare.txt -o models/shakespeare_char.pt
The split is the lecture's: the first 90% of the characters train, the last 10% validate.
"""
import argparse
import json
import math
import os
import time

import torch

from gptpy_model import GPTLanguageModel, window_loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('text')
    ap.add_argument('-o', '--out', required=True)
    ap.add_argument('--n-layer', type=int, default=4)
    ap.add_argument('--n-head', type=int, default=4)
    ap.add_argument('--n-embd', type=int, default=128)
    ap.add_argument('--block-size', type=int, default=128)
    ap.add_argument('--batch-size', type=int, default=32)
    ap.add_argument('--iters', type=int, default=2500)
    ap.add_argument('--lr', type=float, default=2e-3)
    ap.add_argument('--min-lr', type=float, default=1e-4)
    ap.add_argument('--warmup', type=int, default=100)
    ap.add_argument('--eval-every', type=int, default=500)
    ap.add_argument('--threads', type=int, default=0)
    ap.add_argument('--seed', type=int, default=1337)
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.text, encoding='utf-8') as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]

    model = GPTLanguageModel(len(chars), args.n_embd, args.n_head, args.n_layer, args.block_size)
    nparams = sum(p.numel() for p in model.parameters())
    print(f'{nparams / 1e6:.3f} M parameters, vocab_size {len(chars)}, threads {torch.get_num_threads()}', flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)

    def lr_at(it):
        if it < args.warmup:
            return args.lr * (it + 1) / args.warmup
        frac = (it - args.warmup) / max(1, args.iters - args.warmup)
        return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * frac))

    def batch(split):
        d = train_data if split == 'train' else val_data
        ix = torch.randint(len(d) - args.block_size, (args.batch_size,))
        x = torch.stack([d[i:i + args.block_size] for i in ix])
        y = torch.stack([d[i + 1:i + args.block_size + 1] for i in ix])
        return x, y

    @torch.no_grad()
    def estimate(split, iters=20):
        model.eval()
        losses = [model(*batch(split))[1].item() for _ in range(iters)]
        model.train()
        return sum(losses) / len(losses)

    t0 = time.time()
    for it in range(args.iters + 1):
        if it % args.eval_every == 0 or it == args.iters:
            print(f'step {it}: train {estimate("train"):.4f} val {estimate("val"):.4f} '
                  f'({time.time() - t0:.0f} s)', flush=True)
        if it == args.iters:
            break
        for g in opt.param_groups:
            g['lr'] = lr_at(it)
        _, loss = model(*batch('train'))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    train_s = time.time() - t0

    model.eval()
    val_loss, val_tokens = window_loss(model, val_data, args.block_size)
    print(f'val loss (back-to-back windows of {args.block_size}): {val_loss:.4f} over {val_tokens} tokens')
    torch.save(model.state_dict(), args.out)
    # The vocabulary beside the checkpoint: its distinct characters, sorted (what
    # `ember convert --vocab-text` reads back as sorted(set(text))).
    with open(os.path.splitext(args.out)[0] + '.vocab.txt', 'w', encoding='utf-8') as f:
        f.write(''.join(chars))
    report = dict(vars(args), vocab_size=len(chars), parameters=nparams, train_seconds=round(train_s),
                  val_loss=round(val_loss, 4), val_tokens=val_tokens, torch=torch.__version__)
    with open(args.out + '.json', 'w') as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report))


if __name__ == '__main__':
    main()
