#!/usr/bin/env bash
# GPT-2 124M-sized model (random weights, Hugging Face layout, GPT-2's tokenizer, vocab padded
# to 50304) in int8 on this CPU: decode and prefill tokens/s (`ember bench`), memory (weight
# bytes, arena, peak RSS), and the share of the machine's memory read bandwidth that decode
# uses, the bandwidth measured in the same run by bench/membw.cpp. Writes
# bench/gpt2_results.md and prints it.
#   bench/gpt2.sh [--runs N] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
threads=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: bench/gpt2.sh [--runs N] [--threads N]" >&2; exit 1 ;;
  esac
done
scripts/install-deps.sh --tools
scripts/build.sh > /dev/null
mkdir -p bench/out
src=bench/out/gpt2-124m
[[ -f $src/model.safetensors ]] || /usr/bin/python3 tools/make_gpt2_bench_model.py -o $src
model=bench/out/gpt2-124m.int8.ember
build/cli/ember convert $src/model.safetensors --tokenizer tests/fixtures/gpt2/tokenizer --dtype int8 -o $model > bench/out/gpt2-convert.txt
g++ -O3 -march=native -pthread bench/membw.cpp -o bench/out/membw
bench/out/membw > bench/out/gpt2-membw.jsonl
build/cli/ember info $model > bench/out/gpt2-info.txt
cut -d' ' -f1-3 /proc/loadavg > bench/out/gpt2-load.txt  # the machine is shared: the load goes with the figures
/usr/bin/time -f '%M' -o bench/out/gpt2-bench-rss.txt \
  build/cli/ember bench -m $model --runs "$runs" --threads "$threads" --prefill-logits last --json > bench/out/gpt2-bench.json
/usr/bin/time -f '%M' -o bench/out/gpt2-generate-rss.txt \
  build/cli/ember generate -m $model -p 'The meaning of life is' -n 64 --threads "$threads" > bench/out/gpt2-generate.txt
bench/out/membw >> bench/out/gpt2-membw.jsonl  # again after: the machine is shared
python3 bench/gpt2_report.py "$runs" > bench/gpt2_results.md
cat bench/gpt2_results.md
