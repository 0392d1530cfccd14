"""The PyTorch peer: time gpt.py-style generation of a lecture-model checkpoint.

  /usr/bin/python3 bench/peer_torch.py CKPT.pt [--threads N] [--seed S]

decode:  block_size-1 new tokens from [[0]] exactly as gpt.py's generate (crop to the last
         block_size tokens, full forward each step, no KV cache, softmax + multinomial), tokens/s.
prefill: one forward over a full block_size window, tokens/s (median of 5).
Prints one JSON line: {"peer": "pytorch", "torch", "threads", "decode_tok_s", "prefill_tok_s"}.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tools'))
from gptpy_model import GPTLanguageModel  # noqa: E402


def strip(sd):
    return {(k[len('_orig_mod.'):] if k.startswith('_orig_mod.') else k): v for k, v in sd.items()}


def build(sd):
    vocab_size, n_embd = sd['token_embedding_table.weight'].shape
    block_size = sd['position_embedding_table.weight'].shape[0]
    n_layer = len({int(m.group(1)) for k in sd for m in [re.match(r'blocks\.(\d+)\.', k)] if m})
    n_head = len({int(m.group(1)) for k in sd for m in [re.match(r'blocks\.0\.sa\.heads\.(\d+)\.', k)] if m})
    model = GPTLanguageModel(vocab_size, n_embd, n_head, n_layer, block_size)
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    model.eval()
    return model, block_size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('checkpoint')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--seed', type=int, default=1337)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, block_size = build(strip(torch.load(args.checkpoint, map_location='cpu')))

    with torch.no_grad():
        # decode: the lecture's generate (warm up once on a short run first)
        model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=4)
        n_new = block_size - 1
        t0 = time.perf_counter()
        out = model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=n_new)
        decode_s = time.perf_counter() - t0
        assert out.shape == (1, block_size)

        # prefill: one full window, median of 5
        x = torch.randint(0, model.lm_head.out_features, (1, block_size))
        model(x)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
        prefill_s = statistics.median(times)

    print(json.dumps({'peer': 'pytorch', 'torch': torch.__version__, 'threads': torch.get_num_threads(),
                      'decode_tok_s': round(n_new / decode_s, 2),
                      'prefill_tok_s': round(block_size / prefill_s, 1)}))


if __name__ == '__main__':
    main()
