#!/usr/bin/env bash
# Prefill and decode of two ember builds, alternated run by run in one session: `ember bench
# --runs 5 --json` (prefill of one block_size window, every row's logits; decode of the rest of
# the window) on each model, threads 1 and 2, at each kernel level given (EMBER_CPU_KERNELS caps
# the level: e.g. avx512 and avxvnni, whose f32 / f16 code is avx2's). Prints Markdown: every
# round's figures and this / peer ratios, then the range of the ratios per row.
#   bench/prefill_ab.sh [--rounds N] [--levels "avx512 avxvnni"] THIS_EMBER PEER_EMBER MODEL.ember...
# (e.g. build/cli/ember against an older commit's build, on bench/out/full.f32.ember made by
# bench/run.sh).
set -euo pipefail
shopt -s inherit_errexit
export LC_ALL=C
rounds=3
levels="avx512 avxvnni"
while [[ ${1:-} == --* ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    *) echo "bench/prefill_ab.sh: unknown option $1" >&2; exit 1 ;;
  esac
done
[[ $# -ge 3 ]] || { echo "usage: bench/prefill_ab.sh [--rounds N] [--levels \"L...\"] THIS_EMBER PEER_EMBER MODEL.ember..." >&2; exit 1; }
this=$1 peer=$2
shift 2
tmp=$(mktemp -d /tmp/ember-prefill-ab-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# "prefill_tok_s decode_tok_s" of one `ember bench`; its kernels line goes to $tmp/kernels.
one() {
  local bin=$1 model=$2 threads=$3 level=$4
  EMBER_CPU_KERNELS=$level "$bin" bench -m "$model" --threads "$threads" --runs 5 --json > "$tmp/json" 2> "$tmp/err" ||
    { echo "bench/prefill_ab.sh: $bin failed on $model:" >&2; cat "$tmp/err" >&2; exit 1; }
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print("%.0f %.0f" % (j["prefill_tok_s"], j["decode_tok_s"])); print("%s: %s" % (sys.argv[2], j["kernels"]), file=open(sys.argv[3], "a"))' \
    "$tmp/json" "$(basename "$bin") at $level ($bin)" "$tmp/kernels"
}

grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: /- machine: /'
echo "- SIMD flags: $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|f16c|avx512f|avx512bw|avx512_vnni|avx_vnni|asimd|asimddp|i8mm)$' | tr '\n' ' ')"
echo "- $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $rounds rounds, this and peer alternated"
echo "- this: $this ($("$this" --version)); peer: $peer ($("$peer" --version))"
echo
echo "| round | level | model | threads | this prefill tok/s | peer prefill tok/s | this / peer | this decode tok/s | peer decode tok/s |"
echo "|---|---|---|---|---|---|---|---|---|"
: > "$tmp/ratios"
for ((r = 1; r <= rounds; r++)); do
  for level in $levels; do
    for model in "$@"; do
      for threads in 1 2; do
        read -r pa da < <(one "$this" "$model" "$threads" "$level")
        read -r pb db < <(one "$peer" "$model" "$threads" "$level")
        ratio=$(awk -v a="$pa" -v b="$pb" 'BEGIN { printf "%.2f", a / b }')
        echo "$level $(basename "$model") $threads $ratio" >> "$tmp/ratios"
        echo "| $r | $level | $(basename "$model") | $threads | $pa | $pb | ${ratio}x | $da | $db |"
      done
    done
  done
done
echo
echo "Prefill, this / peer, lowest to highest over the rounds:"
echo
sort -k1,3 "$tmp/ratios" | awk '{ k = $1 " " $2 " " $3 " thread(s)"; if (!(k in lo) || $4 < lo[k]) lo[k] = $4; if (!(k in hi) || $4 > hi[k]) hi[k] = $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
  END { for (i = 1; i <= n; i++) printf "- %s: %.2fx to %.2fx\n", order[i], lo[order[i]], hi[order[i]] }'
echo
echo "Kernels that ran (\`ember bench\`):"
echo
sort -u "$tmp/kernels" | sed 's/^/- /'
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
