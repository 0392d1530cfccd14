"""Turns bench/run.sh's JSON lines into the Markdown table the README quotes."""
import datetime
import json
import platform
import statistics
import sys


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    peer = {r['threads']: r for r in rows if r.get('peer') == 'pytorch'}
    # Ratios against PyTorch's best figure over the thread counts tried (here its 2-thread
    # runs are slower than its 1-thread ones).
    best_decode = max((p['decode_tok_s'] for p in peer.values()), default=None)
    best_prefill = max((p['prefill_tok_s'] for p in peer.values()), default=None)
    cpu = 'unknown CPU'
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                cpu = line.split(':', 1)[1].strip()
                break
    except OSError:
        pass
    print(f'Measured {datetime.date.today().isoformat()} on {cpu}, {platform.machine()}, by `bench/run.sh`.')
    print('Model: the lecture\'s full configuration (n_layer 6, n_head 6, n_embd 384, block_size 256, vocab 65), '
          'random weights. Decode: 255 new tokens from one, within block_size (median of runs); '
          'prefill: one window of 256 tokens. "vs PyTorch" divides by PyTorch\'s best figure over its thread counts.')
    print()
    print('| engine | weights | threads | decode tok/s | vs PyTorch | prefill tok/s | vs PyTorch |')
    print('|---|---|---|---|---|---|---|')
    for r in rows:
        if r.get('engine') != 'ember':
            continue
        dr = f"{r['decode_tok_s'] / best_decode:.0f}x" if best_decode else '-'
        pr = f"{r['prefill_tok_s'] / best_prefill:.1f}x" if best_prefill else '-'
        print(f"| ember | {r['dtype']} ({r['weight_bytes'] / 1e6:.1f} MB) | {r['threads']} | {r['decode_tok_s']:.0f} | {dr} "
              f"| {r['prefill_tok_s']:.0f} | {pr} |")
    for th, p in sorted(peer.items()):
        print(f"| PyTorch {p['torch']} gpt.py generate | f32 | {th} | {p['decode_tok_s']:.1f} | "
              f"{p['decode_tok_s'] / best_decode:.2f}x | {p['prefill_tok_s']:.0f} | {p['prefill_tok_s'] / best_prefill:.2f}x |")


def spread(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        return
    d = sorted(r['decode_tok_s'] for r in rows)
    p = sorted(r['prefill_tok_s'] for r in rows)
    print()
    print(f"int8, {rows[0]['threads']} threads, {len(rows)} more runs of `ember bench` a few seconds apart: "
          f"decode min {d[0]:.0f} / median {statistics.median(d):.0f} / max {d[-1]:.0f} tokens/s; "
          f"prefill min {p[0]:.0f} / median {statistics.median(p):.0f} / max {p[-1]:.0f} tokens/s.")


if __name__ == '__main__':
    main()
    if len(sys.argv) > 2:
        spread(sys.argv[2])
