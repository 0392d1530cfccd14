#!/usr/bin/env bash
# Weights mapped from the file (default) against weights read into anonymous memory with huge
# pages advised (--no-mmap): `ember bench --backend cpu --json` decode and prefill tokens/s,
# the two alternating (the order swapped each round), on the default model in int8 and on a
# GPT-2 124M-sized int8 model (random weights, tools/make_gpt2_bench_model.py), with 1 and 2
# threads; start-up (`ember generate -n 1` wall time) and peak RSS of both; the CPU's flags and
# the kernel's THP setting. Prints the medians and the ratio no-mmap / mmap; raw lines in
# bench/out/no_mmap.jsonl.
#   bench/no_mmap.sh [--rounds R] [--runs N] [BUILD_DIR]   (bench/no_mmap_results.md: --rounds 9 --runs 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
runs=3
build=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -*) echo "usage: bench/no_mmap.sh [--rounds R] [--runs N] [BUILD_DIR]" >&2; exit 1 ;;
    *) build=$1; shift ;;
  esac
done
ember=$build/cli/ember
[[ -x $ember ]] || { echo "bench/no_mmap.sh: $ember not found (build first: scripts/build.sh)" >&2; exit 1; }
mkdir -p bench/out
small=bench/out/shakespeare_char.int8.ember
"$ember" convert models/shakespeare_char.pt --vocab-text models/shakespeare_char.vocab.txt --dtype int8 -o $small > /dev/null
src=bench/out/gpt2-124m
[[ -f $src/model.safetensors ]] || /usr/bin/python3 tools/make_gpt2_bench_model.py -o $src
gpt2=bench/out/gpt2-124m.int8.ember
[[ -f $gpt2 ]] || "$ember" convert $src/model.safetensors --tokenizer tests/fixtures/gpt2/tokenizer --dtype int8 -o $gpt2 > /dev/null

out=bench/out/no_mmap.jsonl
: > $out
# one MODEL_NAME MODEL THREADS ROUND MODE ARGS...: one `ember bench` line, tagged, with peak RSS (KiB).
one() {
  local name=$1 model=$2 threads=$3 round=$4 mode=$5; shift 5
  local flag=""
  [[ $mode == no-mmap ]] && flag=--no-mmap
  local j
  j=$(/usr/bin/time -f '%M' -o bench/out/no_mmap.rss "$ember" bench -m "$model" --backend cpu --json --threads "$threads" --runs "$runs" $flag "$@")
  echo "$j" | python3 -c "import json,sys; j=json.loads(sys.stdin.read()); j.update(model='$name', round=$round, mode='$mode', rss_kib=int(open('bench/out/no_mmap.rss').read().split()[-1])); print(json.dumps(j))" >> $out
}
for threads in 1 2; do
  for r in $(seq 1 "$rounds"); do
    if (( r % 2 )); then order="mmap no-mmap"; else order="no-mmap mmap"; fi
    for mode in $order; do
      one default $small "$threads" "$r" "$mode"
      one gpt2-124m $gpt2 "$threads" "$r" "$mode" -p 128 -n 64
    done
  done
done
# Start-up: `ember generate -n 1` wall time, 7 alternating pairs per model.
python3 - "$ember" "$small" "$gpt2" >> $out <<'EOF'
import json, subprocess, sys, time
ember, models = sys.argv[1], {'default': sys.argv[2], 'gpt2-124m': sys.argv[3]}
for name, m in models.items():
    for r in range(7):
        for mode in (['mmap', 'no-mmap'] if r % 2 == 0 else ['no-mmap', 'mmap']):
            cmd = [ember, 'generate', '-m', m, '-n', '1', '--threads', '1', '--backend', 'cpu'] + (['--no-mmap'] if mode == 'no-mmap' else [])
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            print(json.dumps({'startup': True, 'model': name, 'mode': mode, 'seconds': time.perf_counter() - t0}))
EOF

echo "## --no-mmap against the mapped file ($(date -u +%F), $rounds rounds x --runs $runs, alternating)"
echo
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores online, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
thp=/sys/kernel/mm/transparent_hugepage
if [[ -r $thp/enabled ]]; then
  echo "THP: enabled = $(cat $thp/enabled), defrag = $(cat $thp/defrag 2>/dev/null || echo '?')"
else
  echo "THP: $thp/enabled not readable (no transparent huge pages in this kernel)"
fi
echo "RLIMIT_MEMLOCK (ulimit -l): $(ulimit -l) KiB"
echo
python3 - $out <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bench = [r for r in rows if 'startup' not in r]
start = [r for r in rows if 'startup' in r]
med = statistics.median
print('| model | threads | mmap decode tok/s | no-mmap decode tok/s | ratio | mmap prefill tok/s | no-mmap prefill tok/s | ratio | AnonHugePages of the no-mmap copy | peak RSS mmap / no-mmap |')
print('|---|---|---|---|---|---|---|---|---|---|')
for model in ('default', 'gpt2-124m'):
    for t in (1, 2):
        sel = lambda mode: [r for r in bench if r['model'] == model and r['threads'] == t and r['mode'] == mode]
        a, b = sel('mmap'), sel('no-mmap')
        if not a or not b:
            continue
        d0, d1 = med(r['decode_tok_s'] for r in a), med(r['decode_tok_s'] for r in b)
        p0, p1 = med(r['prefill_tok_s'] for r in a), med(r['prefill_tok_s'] for r in b)
        huge = med(r['huge_page_bytes'] for r in b) / 2**20
        mib = b[0]['weight_bytes'] / 2**20
        rss = '%.1f / %.1f MiB' % (med(r['rss_kib'] for r in a) / 1024, med(r['rss_kib'] for r in b) / 1024)
        print('| %s | %d | %.1f | %.1f | %.3f | %.1f | %.1f | %.3f | %.1f MiB (weights %.1f MiB) | %s |' %
              (model, t, d0, d1, d1 / d0, p0, p1, p1 / p0, huge, mib, rss))
print()
print('Ratios per round (no-mmap / mmap, decode; prefill):')
for model in ('default', 'gpt2-124m'):
    for t in (1, 2):
        rs = sorted({r['round'] for r in bench if r['model'] == model and r['threads'] == t})
        parts = []
        for rd in rs:
            g = {r['mode']: r for r in bench if r['model'] == model and r['threads'] == t and r['round'] == rd}
            if len(g) == 2:
                parts.append('%.2f; %.2f' % (g['no-mmap']['decode_tok_s'] / g['mmap']['decode_tok_s'],
                                             g['no-mmap']['prefill_tok_s'] / g['mmap']['prefill_tok_s']))
        print('- %s, %d thread(s): %s' % (model, t, ' | '.join(parts)))
print()
print('| model | `ember generate -n 1` wall, mmap (median of 7) | no-mmap | ratio |')
print('|---|---|---|---|')
for model in ('default', 'gpt2-124m'):
    a = med(r['seconds'] for r in start if r['model'] == model and r['mode'] == 'mmap')
    b = med(r['seconds'] for r in start if r['model'] == model and r['mode'] == 'no-mmap')
    print('| %s | %.1f ms | %.1f ms | %.2f |' % (model, a * 1e3, b * 1e3, b / a))
EOF
