#!/usr/bin/env bash
# Two threads against one where the cores are far apart. Each round first measures how long a
# cache line takes from CPU 0 to CPU 1 and back (bench/roundtrip.cpp: 0.1 to 0.2 us between
# the cores of one chip, 1 to 4 us on this project's 2-vCPU VM at times), then runs
# `ember bench --json` on the shipped model (0.9 MB of int8 weights: about 20 thread-pool
# dispatches of 1 to 2 us each per decoded token) and on the lecture's full configuration in
# int8 (11.5 MB: dispatches of about 10 us), with 2 threads for this build and each --peer, and
# with 1 thread for this build, alternated within the round. Writes bench/far_cores_results.md
# (or --out FILE) and prints it: per round the round trip, decode tokens/s and the share of
# decode's dispatches that ran on the caller alone (kernels/cpu/thread_pool.h).
#   bench/far_cores.sh [--rounds N] [--runs R] [--peer PATH_TO_EMBER] [--out FILE]
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
rounds=4
runs=20
bins=(build/cli/ember)
results=bench/far_cores_results.md
source bench/peer_args.sh
mkdir -p bench/out
g++ -O2 -pthread bench/roundtrip.cpp -o bench/out/roundtrip
vocab=models/shakespeare_char.vocab.txt
small=bench/out/shakespeare_char.int8.ember
full=bench/out/full.int8.ember
[[ -f $small ]] || build/cli/ember convert models/shakespeare_char.pt --vocab-text $vocab --dtype int8 -o $small > /dev/null
[[ -f bench/out/gptpy_full.pt ]] || /usr/bin/python3 tools/make_bench_model.py -o bench/out/gptpy_full.pt --text $vocab > /dev/null
[[ -f $full ]] || build/cli/ember convert bench/out/gptpy_full.pt --vocab-text $vocab --dtype int8 -o $full > /dev/null
log=bench/out/far_cores.jsonl
: > $log

for ((r = 0; r < rounds; ++r)); do
  rt=$(bench/out/roundtrip 0 1 50000)
  for m in $small $full; do
    for b in "${bins[@]}"; do
      out=$("$b" bench -m $m --threads 2 --runs "$runs" --json)
      echo "{\"round\":$r,\"rt\":$rt,\"model\":\"$m\",\"bin\":\"$b\",\"threads\":2,\"bench\":$out}" >> $log
    done
    out=$("${bins[0]}" bench -m $m --threads 1 --runs "$runs" --json)
    echo "{\"round\":$r,\"rt\":$rt,\"model\":\"$m\",\"bin\":\"${bins[0]}\",\"threads\":1,\"bench\":$out}" >> $log
  done
done

python3 - "$log" "$rounds" "$runs" "$(git rev-parse --short HEAD)" "${bins[@]}" > "$results" <<'PY'
import json, statistics, sys, datetime, platform
log, rounds, runs, commit, *bins = sys.argv[1:]
rows = [json.loads(l) for l in open(log)]
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), platform.machine())
flags = next((l.split(':', 1)[1].split() for l in open('/proc/cpuinfo') if l.startswith('flags')), [])
keep = [f for f in ('avx2', 'fma', 'f16c', 'avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni', 'avx_vnni') if f in flags]
print('Measured %s by `bench/far_cores.sh --rounds %s --runs %s` at %s on %s (%s; flags include %s).'
      % (datetime.date.today(), rounds, runs, commit, cpu, platform.machine(), ' '.join(keep)))
print('Decode tokens/s (`ember bench`, median of %s runs), 2 threads for each build and 1 thread for `%s`; '
      'solo = the share of decode\'s dispatches run on the caller alone; round trip = CPU 0 to CPU 1 and back (bench/roundtrip.cpp), '
      'measured at the start of the round.\n' % (runs, bins[0]))
models = list(dict.fromkeys(r['model'] for r in rows))
def get(rnd, m, b, th):
    return next(r for r in rows if r['round'] == rnd and r['model'] == m and r['bin'] == b and r['threads'] == th)
def fig(r):
    j = r['bench']
    s = ''
    if r['threads'] > 1 and j.get('decode_dispatches'):
        s = ' (solo %.0f%%)' % (100.0 * j['decode_solo_dispatches'] / j['decode_dispatches'])
    return '%.0f%s' % (j['decode_tok_s'], s)
for m in models:
    print('`%s`:\n' % m)
    head = ['round', 'round trip, ns'] + ['`%s`, 2 threads' % b for b in bins] + ['`%s`, 1 thread' % bins[0]] + ['2 / 1 thread, `%s`' % b for b in bins]
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for rnd in range(int(rounds)):
        one = get(rnd, m, bins[0], 1)
        cells = [str(rnd), '%.0f' % one['rt']['roundtrip_ns']] + [fig(get(rnd, m, b, 2)) for b in bins] + [fig(one)]
        cells += ['%.2f' % (get(rnd, m, b, 2)['bench']['decode_tok_s'] / one['bench']['decode_tok_s']) for b in bins]
        print('| ' + ' | '.join(cells) + ' |')
    print()
PY
cat "$results"
