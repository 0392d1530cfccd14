"""Turns bench/run.sh's JSON lines into the Markdown table the README quotes."""
import datetime
import json
import platform
import sys


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    peer = {r['threads']: r for r in rows if r.get('peer') == 'pytorch'}
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
          'prefill: one window of 256 tokens.')
    print()
    print('| engine | weights | threads | decode tok/s | vs PyTorch | prefill tok/s | vs PyTorch |')
    print('|---|---|---|---|---|---|---|')
    for r in rows:
        if r.get('engine') != 'ember':
            continue
        p = peer.get(r['threads'])
        dr = f"{r['decode_tok_s'] / p['decode_tok_s']:.0f}x" if p else '-'
        pr = f"{r['prefill_tok_s'] / p['prefill_tok_s']:.1f}x" if p else '-'
        print(f"| ember | {r['dtype']} ({r['weight_bytes'] / 1e6:.1f} MB) | {r['threads']} | {r['decode_tok_s']:.0f} | {dr} "
              f"| {r['prefill_tok_s']:.0f} | {pr} |")
    for th, p in sorted(peer.items()):
        print(f"| PyTorch {p['torch']} gpt.py generate | f32 | {th} | {p['decode_tok_s']:.1f} | 1x | {p['prefill_tok_s']:.0f} | 1x |")


if __name__ == '__main__':
    main()
