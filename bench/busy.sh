#!/usr/bin/env bash
# Decode on a busy machine: the lecture's full configuration in int8 (tools/make_bench_model.py,
# random weights), `ember bench --runs R --json`, decode tokens/s in four conditions:
#   quiet 1 thread, quiet 2 threads, busy 1 thread, busy 2 threads
# where "busy" is one other process spinning (`sh -c 'while :; do :; done'`, no taskset; started
# before the run, killed after it). The conditions are interleaved within each round, and each
# round runs every binary given (this build first; --peer adds another build, e.g. an older
# commit's, measured in the same run). `uptime`'s load average is recorded with every figure:
# other builds share this machine, so "quiet" means no spinner of ours, not an idle machine.
# Each figure also gives the share of decode's thread-pool dispatches that ran on the caller
# alone (the pool measured its worker slower than none: kernels/cpu/thread_pool.h).
# Writes bench/busy_results.md (or --out FILE: one file per machine) and prints it. Targets
# (issue 13): busy 2 threads >= 0.8 of quiet 1 thread, and busy 2 threads >= busy 1 thread.
#   bench/busy.sh [--rounds N] [--runs R] [--peer PATH_TO_EMBER] [--out FILE]
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
rounds=3
runs=5
bins=(build/cli/ember)
results=bench/busy_results.md
source bench/peer_args.sh
mkdir -p bench/out
src=bench/out/gptpy_full.pt
model=bench/out/full.int8.ember
vocab=models/shakespeare_char.vocab.txt
[[ -f $src ]] || /usr/bin/python3 tools/make_bench_model.py -o $src --text $vocab > /dev/null
[[ -f $model ]] || build/cli/ember convert $src --vocab-text $vocab --dtype int8 -o $model > /dev/null
log=bench/out/busy.jsonl
: > $log

spinner=
stop_spinner() { if [[ -n $spinner ]]; then kill "$spinner" 2> /dev/null || true; wait "$spinner" 2> /dev/null || true; spinner=; fi; }
trap stop_spinner EXIT

# One figure: binary, condition (quiet|busy), threads.
measure() {
  local bin=$1 cond=$2 threads=$3 load out
  if [[ $cond == busy ]]; then
    sh -c 'while :; do :; done' &
    spinner=$!
    sleep 0.2
  fi
  load=$(cut -d' ' -f1 /proc/loadavg)
  out=$("$bin" bench -m $model --threads "$threads" --runs "$runs" --json)
  stop_spinner
  echo "{\"bin\":\"$bin\",\"cond\":\"$cond\",\"threads\":$threads,\"load\":$load,\"bench\":$out}" >> $log
}

for ((r = 0; r < rounds; ++r)); do
  for b in "${bins[@]}"; do
    for c in "quiet 1" "quiet 2" "busy 1" "busy 2"; do
      # shellcheck disable=SC2086
      measure "$b" $c
    done
  done
done

python3 - "$log" "$rounds" "$runs" "$(git rev-parse --short HEAD)" > "$results" <<'EOF'
import json, statistics, sys, datetime, platform
log, rounds, runs, commit = sys.argv[1:5]
rows = [json.loads(l) for l in open(log)]
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), platform.machine())
flags = next((l.split(':', 1)[1].split() for l in open('/proc/cpuinfo') if l.startswith('flags')), [])
keep = [f for f in ('avx2', 'fma', 'f16c', 'avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni', 'avx_vnni') if f in flags]
print('Measured %s by `bench/busy.sh --rounds %s --runs %s` at %s on %s (%s, %d CPUs; flags include %s).'
      % (datetime.date.today(), rounds, runs, commit, cpu, platform.machine(), len(open('/proc/cpuinfo').read().split('processor\t')) - 1, ' '.join(keep)))
print('Model: the lecture\'s full configuration in int8 (n_layer 6, n_embd 384, block_size 256, 11.5 MB), decode 255 tokens from one.')
print('"busy": one `sh -c \'while :; do :; done\'` spinning during the run. Figures in round order; load = 1-minute load average at the start of each;'
      ' solo = the share of decode\'s thread-pool dispatches run on the caller alone (where the build reports it).\n')
print('| ember | condition | threads | decode tok/s (load, solo) | median | / quiet 1 thread |')
print('|---|---|---|---|---|---|')
med = {}
for b in dict.fromkeys(r['bin'] for r in rows):
    for cond, th in (('quiet', 1), ('quiet', 2), ('busy', 1), ('busy', 2)):
        sel = [r for r in rows if r['bin'] == b and r['cond'] == cond and r['threads'] == th]
        med[b, cond, th] = statistics.median(r['bench']['decode_tok_s'] for r in sel)
    for cond, th in (('quiet', 1), ('quiet', 2), ('busy', 1), ('busy', 2)):
        sel = [r for r in rows if r['bin'] == b and r['cond'] == cond and r['threads'] == th]
        def fig(r):
            bench = r['bench']
            solo = ''
            if th > 1 and bench.get('decode_dispatches'):
                solo = ', solo %.0f%%' % (100.0 * bench['decode_solo_dispatches'] / bench['decode_dispatches'])
            return '%.0f (load %.1f%s)' % (bench['decode_tok_s'], r['load'], solo)
        figs = ', '.join(fig(r) for r in sel)
        print('| `%s` | %s | %d | %s | %.0f | %.2f |' % (b, cond, th, figs, med[b, cond, th], med[b, cond, th] / med[b, 'quiet', 1]))
print()
for b in dict.fromkeys(r['bin'] for r in rows):
    q1, b1, b2 = med[b, 'quiet', 1], med[b, 'busy', 1], med[b, 'busy', 2]
    print('- `%s`: busy 2 threads / quiet 1 thread = %.2f (target >= 0.8: %s); busy 2 / busy 1 = %.2f (target >= 1: %s)'
          % (b, b2 / q1, 'met' if b2 >= 0.8 * q1 else 'not met', b2 / b1, 'met' if b2 >= b1 else 'not met'))
EOF
cat "$results"
