"""Renders bench/gpt2_results.md from the outputs bench/gpt2.sh leaves in bench/out/.
  python3 bench/gpt2_report.py RUNS
Bytes per decoded token: every weight once (wpe: one row) + K and V of the mean context (f16 or f32, as
the bench ran). Bandwidth-bound decode: tok/s = read bandwidth / weight bytes per token (issue 13)."""
import json, platform, re, sys, datetime
runs = sys.argv[1]
b = json.load(open('bench/out/gpt2-bench.json'))
bw = [json.loads(l) for l in open('bench/out/gpt2-membw.jsonl')]
info = open('bench/out/gpt2-info.txt').read()
wpe = int(re.search(r'^wpe\s+\S+\s+\S+\s+\S+\s+(\d+)', info, re.M).group(1))
arena = int(re.search(r'arena: (\d+) bytes to generate', info).group(1))
rss_gen = int(open('bench/out/gpt2-generate-rss.txt').read().split()[-1]) * 1024
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), platform.machine())
L, C, S = 12, 768, b['block_size']
th = b['threads']
bw_th = min(th, max(y['threads'] for y in bw))
seen = [x['read_GB_s'] for x in bw if x['threads'] == bw_th]
peak, low = max(seen), min(seen)
w_tok = b['weight_bytes'] - wpe                 # every weight once per token; one row of wpe
kv_el = 2 if b.get('kv_cache', 'f32') == 'f16' else 4
kv_tok = 2 * L * C * kv_el * (S / 2)            # K and V, mean context of the decode run
d = b['decode_tok_s']
load = open('bench/out/gpt2-load.txt').read().split()
print('Measured %s on %s (%s), by `bench/gpt2.sh --runs %s`; this 2-core machine was shared with other builds'
      ' (load average %s, %s, %s over 1, 5, 15 minutes when the bench began).\n'
      % (datetime.date.today(), cpu, platform.machine(), runs, load[0], load[1], load[2]))
print('| figure | value |\n|---|---|')
print('| model | GPT-2 124M shape (n_layer 12, n_head 12, n_embd 768, block_size 1024, vocab 50257 padded to 50304), random weights, int8 groups of 64 |')
print('| threads | %d |' % th)
print('| decode | %.1f tokens/s (%d tokens from one, within block_size; median of %s) |' % (d, S - 1, runs))
print('| prefill | %.1f tokens/s (one window of %d, %s) |' % (b['prefill_tok_s'], S, 'the last row\'s logits' if b.get('prefill_logits') == 'last' else 'every row\'s logits'))
print('| weights | %.1f MB (int8 + f32 scales; mapped from the file) |' % (b['weight_bytes'] / 1e6))
print('| arena (generate) | %.1f MB (KV cache %s %.1f MB, activations, logits) |' % (arena / 1e6, b.get('kv_cache', 'f32'), 2 * L * S * C * kv_el / 1e6))
print('| peak RSS, `ember generate -n 64` | %.1f MB |' % (rss_gen / 1e6))
print('| memory read bandwidth (bench/membw.cpp, %d thread(s), 1 GiB, runs before and after the bench) | %.2f GB/s best (%.2f lowest) |' % (bw_th, peak, low))
print('| bytes read per decoded token | %.1f MB weights + %.1f MB KV cache (mean over the run) |' % (w_tok / 1e6, kv_tok / 1e6))
share = lambda b, bw_: 100 * d * b / 1e9 / bw_
print('| share of the bandwidth decode uses | %.0f%% of the best (%.0f%% of the lowest); weights alone %.0f%% (%.0f%%) |'
      % (share(w_tok + kv_tok, peak), share(w_tok + kv_tok, low), share(w_tok, peak), share(w_tok, low)))
bound = lambda bw_: bw_ * 1e9 / w_tok
print('| bandwidth-bound decode for the weights (bandwidth / weight bytes per token) | %.1f tokens/s at the best, %.1f at the lowest |' % (bound(peak), bound(low)))
print('| decode / bandwidth-bound (issue 13: >= 70%%, goal 90%%) | %.0f%% of the best, %.0f%% of the lowest |' % (100 * d / bound(peak), 100 * d / bound(low)))
