"""Renders bench/targets_results.md from bench/targets.sh's JSON lines.
  python3 bench/targets_report.py bench/out/targets.jsonl THIS_BIN [PEER_BIN]
Each figure is the median over rounds of `ember bench`'s own median. The bound: read bandwidth
(bench/membw.cpp, best and lowest of the before/after runs, at the thread count) / weight bytes
per token (every weight once; wpe's one row is ignored, 0.2% for the full configuration); and
each GPT-2 decode run against the DRAM rate measured right before and after it."""
import datetime, json, platform, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1])]
bins = sys.argv[2:]
bench = [r for r in rows if r['kind'] == 'bench']
bw = [r for r in rows if r['kind'] == 'membw']


def pick(b, model, case, field):
    v = [r[field] for r in bench if r['bin'] == b and r['model'] == model and r['case'] == case]
    return statistics.median(v) if v else None


def bandwidth(mib, threads):
    """Best and lowest of the reads before the first round and after the last."""
    v = [r['read_GB_s'] for r in bw if r['buffer_MiB'] == mib and r['threads'] == threads and r['when'] in ('before', 'after')]
    return max(v), min(v)


def weights(model):
    return next(r['weight_bytes'] for r in bench if r['model'] == model)


cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), platform.machine())
flags = next((l.split(':', 1)[1].split() for l in open('/proc/cpuinfo') if l.startswith('flags')), [])
simd = [f for f in flags if f.startswith(('avx', 'fma', 'f16c', 'amx'))]
loads = sorted({r['load'] for r in bench}, key=float)
kern = next(r['kernels'] for r in bench if r['bin'] == bins[0])
rounds = max(r['round'] for r in bench)
print('Measured %s on %s (%s, %d CPUs; SIMD flags: %s) by `bench/targets.sh`, %d round(s), load average '
      '(1 min) %s to %s over the rounds. This build: `%s` (kernels: %s)%s.\n'
      % (datetime.date.today(), cpu, platform.machine(), len([l for l in open('/proc/cpuinfo') if l.startswith('processor')]),
         ' '.join(simd), rounds, loads[0], loads[-1], bins[0], kern,
         '; peer: `%s`, measured in the same rounds' % bins[1] if len(bins) > 1 else ''))
hdr = '| figure | target (issue 13) | this build |' + (' peer | this / peer |' if len(bins) > 1 else '') + ' bound here |'
print(hdr)
print('|' + '---|' * (hdr.count('|') - 1))
wf, wg = weights('full'), weights('gpt2')


def line(name, target, model, case, field, bound=''):
    this = pick(bins[0], model, case, field)
    if this is None:
        return
    cells = [name, target, '%.0f' % this]
    if len(bins) > 1:
        peer = pick(bins[1], model, case, field)
        cells += ['%.0f' % peer, '%.2fx' % (this / peer)] if peer else ['-', '-']
    cells.append(bound)
    print('| ' + ' | '.join(cells) + ' |')


for th in (1, 2):
    hi, lo = bandwidth(12, th)
    line('full config decode, %d thread%s, tok/s' % (th, 's' if th > 1 else ''), '>= 4,500 (2 threads)' if th == 2 else '',
         'full', 'threads %d' % th, 'decode_tok_s',
         '%.0f to %.0f if every weight came from L3 (%.1f to %.1f GB/s over 12 MiB / %.1f MB)' % (lo * 1e9 / wf, hi * 1e9 / wf, lo, hi, wf / 1e6))
    line('full config prefill of 256, %d thread%s, tok/s' % (th, 's' if th > 1 else ''), '>= 10,000 (2 threads)' if th == 2 else '',
         'full', 'threads %d' % th, 'prefill_tok_s')
line('GPT-2 prefill of 1024, every row\'s logits, 2 threads, tok/s', '', 'gpt2', 'prefill all', 'prefill_tok_s')
line('GPT-2 prefill of 1024, the last row\'s logits, 2 threads, tok/s', '>= 800', 'gpt2', 'prefill last', 'prefill_tok_s')
hi, lo = bandwidth(1024, 2)
d = pick(bins[0], 'gpt2', 'decode', 'decode_tok_s')
line('GPT-2 decode, 255 from one, 2 threads, tok/s', '>= 70% of the bound (goal 90%)', 'gpt2', 'decode', 'decode_tok_s',
     '%.1f to %.1f (%.1f to %.1f GB/s over 1 GiB / %.1f MB): this build at %.0f%% to %.0f%%'
     % (lo * 1e9 / wg, hi * 1e9 / wg, lo, hi, wg / 1e6, 100 * d * wg / 1e9 / hi, 100 * d * wg / 1e9 / lo))


def paired_shares(b):
    """Each GPT-2 decode run of b against the 2-thread DRAM read rate measured right before and
    right after it (the mean of the two), in round order; [] for runs made without them."""
    out = []
    for r in sorted((r for r in bench if r['bin'] == b and r['model'] == 'gpt2' and r['case'] == 'decode'), key=lambda r: r['round']):
        around = [m['read_GB_s'] for m in bw if m.get('bin') == b and m.get('round') == r['round'] and m['threads'] == 2
                  and m['when'] in ('decode before', 'decode after')]
        if len(around) == 2:
            rate = statistics.mean(around)
            out.append((r['decode_tok_s'] * wg / 1e9 / rate, rate))
    return out


paired = [(b, paired_shares(b)) for b in bins]
if any(p for _, p in paired):
    print('\nGPT-2 decode against the DRAM read rate measured right before and right after each run (2 threads,'
          ' 1 GiB; the mean of the two), per round: ' + '; '.join(
              '`%s` %s (median %.0f%%)' % (b, ', '.join('%.0f%% of %.1f GB/s' % (100 * s, gb) for s, gb in p),
                                           100 * statistics.median(s for s, _ in p)) for b, p in paired if p) + '.')


def cache_size(index):
    """A cache level's size as sysfs gives it for cpu0 (e.g. '512K', '32768K'), or None."""
    try:
        return open('/sys/devices/system/cpu/cpu0/cache/index%d/size' % index).read().strip()
    except OSError:
        return None


def l3_size():
    """L3 from sysfs, else the last-level cache size `ember bench` used and where it came from."""
    if cache_size(3):
        return cache_size(3)
    rec = next((r for r in bench if r.get('last_level_cache_bytes')), None)
    if rec:
        return '%d MiB per %s' % (rec['last_level_cache_bytes'] >> 20, rec.get('last_level_cache_source', '?'))
    return 'unknown: no sysfs cache entries'


print('\nThe full configuration\'s %.1f MB of weights exceed one core\'s L2 (%s here) but not L2 + L3 (L3 %s),'
      ' so its "bound" above is the rate at which as many threads as the row names read a 12 MiB buffer in repeated'
      ' sweeps (bench/membw.cpp): not a hard limit, since each core\'s L2 keeps part of the weights its rows use'
      ' between tokens. GPT-2\'s %.1f MB come from DRAM every token: its bound is the one issue 13 names'
      ' (read bandwidth / weight bytes).' % (wf / 1e6, cache_size(2) or 'unknown: no sysfs cache entries', l3_size(), wg / 1e6))


def solo_shares(b, model, case):
    """Per round, the share of decode's thread-pool dispatches run on the caller alone."""
    sel = [r for r in bench if r['bin'] == b and r['model'] == model and r['case'] == case and r.get('decode_dispatches')]
    return ', '.join('%.0f%%' % (100.0 * r['decode_solo_dispatches'] / r['decode_dispatches']) for r in sel)


parts = []
for b in bins:
    full, gpt2 = solo_shares(b, 'full', 'threads 2'), solo_shares(b, 'gpt2', 'decode')
    if full or gpt2:
        parts.append('`%s`: full configuration %s; GPT-2 %s' % (b, full or '-', gpt2 or '-'))
if parts:
    print('\nDecode\'s thread-pool dispatches that ran on the caller alone (2 threads, the pool having measured its'
          ' worker slower than none; kernels/cpu/thread_pool.h), per round: ' + '; '.join(parts) + '.')
