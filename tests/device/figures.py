"""Turn tests/device/run.sh's bench.jsonl into a Markdown table (stdout).

  python3 tests/device/figures.py bench.jsonl machine.txt > figures.md

Rows: ember (cuda / cpu backends) and the PyTorch peer per model; the decode targets of
issue #3 (lecture int8 >= 10,000 tokens/s, GPT-2 124M int8 >= 2,500) marked met or not.
"""
import json
import sys

TARGETS = {'lecture': 10000, 'gpt2-124m': 2500}


def main():
    rows = []
    with open(sys.argv[1], encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            if line.startswith('{'):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    machine = open(sys.argv[2], encoding='utf-8').read().strip() if len(sys.argv) > 2 else ''
    print('## ember CUDA backend: measured by tests/device/run.sh\n')
    print('```\n' + machine + '\n```\n')
    print('| model | engine | weights | decode tokens/s | prefill tokens/s | decode share of peak bandwidth | decode target |')
    print('|---|---|---|---:|---:|---:|---|')
    for r in rows:
        model = r.get('model', '?')
        if r.get('peer') == 'pytorch':
            if 'error' in r:
                print(f"| {model} | PyTorch | - | - | - | - | {r['error']} |")
                continue
            engine = f"PyTorch {r.get('torch', '')} on {r.get('device', '')}, gpt.py-style generate (no KV cache)"
            weights = r.get('dtype', '')
            share = '-'
            target = ''
        else:
            engine = f"ember --backend {r.get('backend', '?')}" + (f" ({r['threads']} threads)" if r.get('backend') == 'cpu' else '')
            weights = r.get('dtype', '')
            share = f"{100 * r['decode_bandwidth_share']:.1f}%" if 'decode_bandwidth_share' in r else '-'
            target = ''
            if r.get('backend') == 'cuda' and r.get('dtype') == 'int8' and model in TARGETS:
                goal = TARGETS[model]
                target = f"{'met' if r['decode_tok_s'] >= goal else 'NOT met'} (>= {goal:,})"
            if 'NOT captured' in r.get('describe', ''):
                target += ' (decode graph not captured: eager launches)'
        print(f"| {model} | {engine} | {weights} | {r.get('decode_tok_s', 0):,.0f} | {r.get('prefill_tok_s', 0):,.0f} | {share} | {target} |")
    print('\nDecode: block_size - 1 greedy tokens from one token; ember samples on the host from logits copied back each step.')
    print('Prefill: one block_size window (ember CUDA: reset + append, last-row logits).')


if __name__ == '__main__':
    main()
