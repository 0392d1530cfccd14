#!/usr/bin/env bash
# Start-up time and memory of the build's `ember`, against targets and against a peer measured
# in the same run (`/usr/bin/python3 -c 'import torch'`):
#   (i)   `ember --version` peak RSS                               target <= 20 MB
#   (ii)  `ember generate -m MODEL -n 1` wall time, median of 21    target <= 60 ms
#         (the default model in int8; each run is a new process, but the page cache cannot be
#         dropped here, so "cold" means a fresh process with the file in the page cache)
#   (iii) a CPU `ember generate` (200 tokens) peak RSS              target <= file + arena + 8 MiB
#         (arena: `ember info`'s "arena: N bytes to generate"), for the default model and, when
#         /usr/bin/python3 has torch, the lecture's full configuration (tools/make_bench_model.py)
# Peak RSS is ru_maxrss of the child (/usr/bin/time -f %M); wall time is bash's $EPOCHREALTIME
# around the run (fork + exec included). Prints Markdown and writes it to bench/startup_results.md.
#   bench/startup.sh [BUILD_DIR]     (default build)
set -euo pipefail
shopt -s inherit_errexit  # a failing run inside $(...) stops the script, never a fast "time"
export LC_ALL=C
cd "$(dirname "$0")/.."
build=${1:-build}
ember=$build/cli/ember
[[ -x $ember ]] || { echo "bench/startup.sh: $ember not found (build first: cmake -S . -B build && cmake --build build)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench/startup.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/ember-startup-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
results=bench/startup_results.md
runs=21
peer_runs=7
mib=$((1024 * 1024))

# Peak RSS in KiB of one run of "$@" (stdout and stderr discarded).
peak_rss_kib() {
  /usr/bin/time -f '%M' -o "$tmp/rss" "$@" > /dev/null 2>&1
  tail -n 1 "$tmp/rss"
}
# Wall time in microseconds of one run of "$@".
wall_us() {
  local t0 t1
  t0=${EPOCHREALTIME/./}
  "$@" > /dev/null 2>&1
  t1=${EPOCHREALTIME/./}
  echo $((t1 - t0))
}
# Median of N runs of "$@", in microseconds.
median_us() {
  local n=$1; shift
  local i
  for ((i = 0; i < n; ++i)); do wall_us "$@"; done | sort -n | sed -n "$(((n + 1) / 2))p"
}
ms() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1000 }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
verdict() { if [[ $1 -le $2 ]]; then echo PASS; else echo FAIL; fi; }

{
echo "# ember start-up and memory (bench/startup.sh)"
echo
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
have=""
for f in avx2 fma f16c avx512f avx512bw avx512_vnni avx_vnni avx512_bf16 amx_int8; do
  [[ " $flags " == *" $f "* ]] && have+="${have:+ }$f"
done
echo "- machine: ${cpu:-unknown CPU}, $(nproc) cores online (ember's threads: all of them, the default), flags: ${have:-none of avx2/fma/f16c/avx512/vnni}"
echo "- ember: $("$ember" --version 2>&1 | head -n 1), $ember; $(date -u +%Y-%m-%d)"
echo "- 1 MB here = 1 MiB = 1,048,576 bytes; peak RSS is ru_maxrss (/usr/bin/time %M); wall time from \$EPOCHREALTIME, fork + exec included"
echo "- \"cold\": each run is a new process; the page cache cannot be dropped on this machine, so the model file and the binary are in it"
echo

# The default model in int8, converted here.
model=$tmp/shakespeare_char.int8.ember
"$ember" convert models/shakespeare_char.pt --vocab-text models/shakespeare_char.vocab.txt --dtype int8 -o "$model" > /dev/null
models=("default model (shakespeare_char, int8)|$model")
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  have_torch=1
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tools/make_bench_model.py -o "$tmp/gptpy_full.pt" \
    --text models/shakespeare_char.vocab.txt > /dev/null
  "$ember" convert "$tmp/gptpy_full.pt" --vocab-text models/shakespeare_char.vocab.txt --dtype int8 -o "$tmp/full.int8.ember" > /dev/null
  models+=("lecture full config (6 x 384, block 256, random weights, int8)|$tmp/full.int8.ember")
else
  have_torch=0
fi

echo "| measure | ember | target | verdict |"
echo "|---|---|---|---|"
version_kib=$(peak_rss_kib "$ember" --version)
echo "| \`ember --version\` peak RSS | $(mb $((version_kib * 1024))) MB | <= 20 MB | $(verdict $((version_kib * 1024)) $((20 * mib))) |"
"$ember" generate -m "$model" -n 1 > /dev/null  # once, so the file is in the page cache like every later run
gen_us=$(median_us $runs "$ember" generate -m "$model" -n 1)
echo "| \`ember generate -m MODEL -n 1\` wall, median of $runs (default model, int8) | $(ms "$gen_us") ms | <= 60 ms | $(verdict "$gen_us" 60000) |"
for entry in "${models[@]}"; do
  name=${entry%%|*}
  m=${entry#*|}
  file_bytes=$(stat -c %s "$m")
  arena=$("$ember" info "$m" | sed -n 's/.*arena: \([0-9]*\) bytes to generate.*/\1/p')
  rss_kib=$(peak_rss_kib "$ember" generate -m "$m" -n 200 --backend cpu)
  limit=$((file_bytes + arena + 8 * mib))
  echo "| CPU \`ember generate -n 200\` peak RSS, $name | $(mb $((rss_kib * 1024))) MB | <= file $(mb "$file_bytes") + arena $(mb "$arena") + 8 = $(mb $limit) MB | $(verdict $((rss_kib * 1024)) $limit) |"
done
echo

if [[ $have_torch == 1 ]]; then
  peer=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 -c 'import torch')
  torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2> /dev/null)
  "${peer[@]}"  # warm its files into the page cache too
  peer_us=$(median_us $peer_runs "${peer[@]}")
  peer_kib=$(peak_rss_kib "${peer[@]}")
  echo "Peer, same run: \`/usr/bin/python3 -c 'import torch'\` (torch $torch_version), the start-up alone, before any model is read."
  echo
  echo "| | peer | ember | peer / ember |"
  echo "|---|---|---|---|"
  echo "| wall: \`import torch\` (median of $peer_runs) vs \`ember generate -n 1\` (median of $runs) | $(ms "$peer_us") ms | $(ms "$gen_us") ms | $(awk -v a="$peer_us" -v b="$gen_us" 'BEGIN { printf "%.0fx", a / b }') |"
  echo "| peak RSS: \`import torch\` vs \`ember --version\` | $(mb $((peer_kib * 1024))) MB | $(mb $((version_kib * 1024))) MB | $(awk -v a="$peer_kib" -v b="$version_kib" 'BEGIN { printf "%.0fx", a / b }') |"
else
  echo "Peer skipped: /usr/bin/python3 has no torch (scripts/install-deps.sh --tools installs python3-torch); the bigger model (tools/make_bench_model.py needs torch) too."
fi
} | tee "$results.tmp"
mv "$results.tmp" "$results"
