#!/usr/bin/env bash
# Start-up of two ember builds, alternated run by run in one session: `generate -n 1` (process
# start to exit: open and verify the model, size the arena, prefill the prompt, one token) wall
# time and peak RSS, on each model given. Prints Markdown: medians and this / peer ratios.
#   bench/startup_ab.sh [--runs N] THIS_EMBER PEER_EMBER MODEL.ember...
# (e.g. build/cli/ember against an older commit's build; GPT-2 models want -p The, which every
# tokenizer encodes). Wall time is bash's $EPOCHREALTIME around the run; peak RSS is the
# child's ru_maxrss (/usr/bin/time -f %M). The page cache cannot be dropped here: every run
# finds the model file in it.
set -euo pipefail
shopt -s inherit_errexit
export LC_ALL=C
runs=11
if [[ ${1:-} == --runs ]]; then runs=$2; shift 2; fi
[[ $# -ge 3 ]] || { echo "usage: bench/startup_ab.sh [--runs N] THIS_EMBER PEER_EMBER MODEL.ember..." >&2; exit 1; }
this=$1 peer=$2
shift 2
[[ -x /usr/bin/time ]] || { echo "bench/startup_ab.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/ember-startup-ab-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# "wall_us rss_kib" of one run.
one() {
  local bin=$1 model=$2 t0 t1
  t0=${EPOCHREALTIME/./}
  /usr/bin/time -f '%M' -o "$tmp/rss" "$bin" generate -m "$model" -p The -n 1 --seed 1 > /dev/null 2> "$tmp/err" ||
    { echo "bench/startup_ab.sh: $bin failed on $model:" >&2; cat "$tmp/err" >&2; exit 1; }
  t1=${EPOCHREALTIME/./}
  echo "$((t1 - t0)) $(tail -n 1 "$tmp/rss")"
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: /- machine: /'
echo "- SIMD flags: $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|f16c|avx512f|avx512bw|avx512_vnni|avx_vnni|asimd|asimddp|i8mm)$' | tr '\n' ' ')"
echo "- transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown); kernel $(uname -r)"
echo "- $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $runs runs of each build per model, alternated"
echo "- this: $this ($("$this" --version)); peer: $peer ($("$peer" --version))"
echo
echo "| model | file MB | this: ms (median) | peer: ms | this / peer | this: peak RSS MB | peer: peak RSS MB | this / peer |"
echo "|---|---|---|---|---|---|---|---|"
for model in "$@"; do
  : > "$tmp/a" && : > "$tmp/b"
  for ((i = 0; i < runs; i++)); do
    one "$this" "$model" >> "$tmp/a"
    one "$peer" "$model" >> "$tmp/b"
  done
  ta=$(cut -d' ' -f1 "$tmp/a" | median) tb=$(cut -d' ' -f1 "$tmp/b" | median)
  ra=$(cut -d' ' -f2 "$tmp/a" | median) rb=$(cut -d' ' -f2 "$tmp/b" | median)
  awk -v m="$(basename "$model")" -v sz="$(stat -c %s "$model")" -v ta="$ta" -v tb="$tb" -v ra="$ra" -v rb="$rb" 'BEGIN {
    printf "| %s | %.1f | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx |\n", m, sz / 1048576, ta / 1000, tb / 1000, ta / tb, ra / 1024, rb / 1024, ra / rb }'
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
