"""The PyTorch peer on the GPU: gpt.py-style generation of a checkpoint with torch on CUDA.

  python3 bench/peer_torch_cuda.py CKPT.pt --arch gptpy|nanogpt [--dtype float32|float16]

decode:  block_size-1 new tokens from [[0]] as gpt.py's generate does (crop to the last
         block_size tokens, full forward each step, no KV cache, softmax + multinomial),
         tokens/s, after a short warm-up; torch.cuda.synchronize() around the timing.
prefill: one forward over a full block_size window, tokens/s (median of 5).
Prints one JSON line: {"peer": "pytorch", "torch", "device", "dtype", "decode_tok_s", "prefill_tok_s"}.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tools'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def load(path, arch):
    if arch == 'nanogpt':
        from nanogpt_model import load_nanogpt
        model, _ = load_nanogpt(path)
        return model, model.config.block_size, lambda m, x: m(x)
    from peer_torch import build, strip
    model, block_size = build(strip(torch.load(path, map_location='cpu')))
    return model, block_size, lambda m, x: m(x)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('checkpoint')
    ap.add_argument('--arch', choices=['gptpy', 'nanogpt'], required=True)
    ap.add_argument('--dtype', choices=['float32', 'float16'], default='float32')
    ap.add_argument('--seed', type=int, default=1337)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({'peer': 'pytorch', 'error': 'torch.cuda.is_available() is False'}))
        return
    torch.manual_seed(args.seed)
    dev = torch.device('cuda')
    model, block_size, logits_of = load(args.checkpoint, args.arch)
    model = model.to(dev, dtype=getattr(torch, args.dtype)).eval()

    def generate(n):
        idx = torch.zeros((1, 1), dtype=torch.long, device=dev)
        for _ in range(n):
            logits = logits_of(model, idx[:, -block_size:])[:, -1, :]
            idx_next = torch.multinomial(F.softmax(logits.float(), dim=-1), num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    with torch.no_grad():
        generate(8)
        torch.cuda.synchronize()
        n_new = block_size - 1
        t0 = time.perf_counter()
        out = generate(n_new)
        torch.cuda.synchronize()
        decode_s = time.perf_counter() - t0
        assert out.shape == (1, block_size)
        x = torch.randint(0, 50, (1, block_size), device=dev)
        logits_of(model, x)
        times = []
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits_of(model, x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        prefill_s = statistics.median(times)
    print(json.dumps({'peer': 'pytorch', 'torch': torch.__version__, 'device': torch.cuda.get_device_name(0),
                      'dtype': args.dtype, 'decode_tok_s': round(n_new / decode_s, 1),
                      'prefill_tok_s': round(block_size / prefill_s, 1)}))


if __name__ == '__main__':
    main()
