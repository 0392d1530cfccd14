#!/usr/bin/env bash
# ember against llama.cpp (npm's node-llama-cpp 3.21.1 prebuilt libraries, driven by
# bench/llama/llama_bench.cpp) and PyTorch, on the same weights, in the same run, alternating
# the engines: ember int8 vs llama.cpp q8_0 and ember f16 vs llama.cpp f16, threads 1 and 2.
# Models: the shipped model (models/shakespeare_char.pt), the lecture's full configuration
# (tools/make_bench_model.py) and the GPT-2 124M shape (tools/make_gpt2_bench_model.py).
# Measures decode tok/s (short context: min(200, block_size/4) tokens from one; long: block_size-1
# from one), prefill tok/s (one window), start-up (process start to the first token, wall time,
# median of 5) and peak RSS (of the long-context process), memory read bandwidth (bench/membw.cpp,
# before and after), the load (uptime) before each model, the CPU flags and the llama.cpp CPU
# variant that ran. First checks the GGUF writer against PyTorch (bench/llama/check.py).
# Writes bench/out/vs_llama/*.jsonl, bench/llama_results.md and bench/llama_plot.png.
#   bench/vs_llama.sh [--rounds N]   (N rounds of the small models, default 2; GPT-2: one)
# The last run took 4.5 minutes on 2 idle vCPUs (npm package installed); 32 minutes at a load average of 4 to 10 (GPT-2 dominates).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2
[[ "${1:-}" == "--rounds" ]] && rounds=$2
scripts/install-deps.sh --tools
[[ -f build/CMakeCache.txt ]] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build.log
cmake --build build -j2 --target ember > build.log
driver=$(bench/llama/setup.sh)
ember=build/cli/ember
out=bench/out/vs_llama
mkdir -p $out
: > $out/bench.jsonl; : > $out/startup.jsonl; : > $out/load.txt; : > $out/torch.jsonl
g++ -O3 -march=native -pthread bench/membw.cpp -o bench/out/membw
bench/out/membw > $out/membw.jsonl
{ grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; nproc; } > $out/cpu.txt
git rev-parse --short HEAD > $out/commit.txt

# Source checkpoints (random weights, not committed).
[[ -f bench/out/gpt2-124m/model.safetensors ]] || /usr/bin/python3 tools/make_gpt2_bench_model.py -o bench/out/gpt2-124m
[[ -f bench/out/gptpy_full.pt ]] || /usr/bin/python3 tools/make_bench_model.py -o bench/out/gptpy_full.pt --text models/shakespeare_char.vocab.txt

# The GGUF writer against PyTorch's logits (f16 and q8_0), on every model benchmarked and the fixtures.
/usr/bin/python3 bench/llama/check.py hf:tests/fixtures/gpt2/hf/model.safetensors nanogpt:tests/fixtures/gpt2/nanogpt/ckpt.pt \
  gptpy:models/shakespeare_char.pt:4 gptpy:bench/out/gptpy_full.pt:6 hf:bench/out/gpt2-124m/model.safetensors | tee $out/check.jsonl

# name  source  n_head  block_size  ember convert's tokenizer options  prompt for ember generate
models=(
  "shipped models/shakespeare_char.pt 4 128 --vocab-text=models/shakespeare_char.vocab.txt ROMEO:"
  "full bench/out/gptpy_full.pt 6 256 --vocab-text=models/shakespeare_char.vocab.txt ROMEO:"
  "gpt2 bench/out/gpt2-124m/model.safetensors 12 1024 --tokenizer=tests/fixtures/gpt2/tokenizer The"
)
for spec in "${models[@]}"; do
  read -r name src heads window tok prompt <<< "$spec"
  for pair in int8:q8_0 f16:f16; do
    $ember convert "$src" "$tok" --dtype "${pair%%:*}" -o bench/out/vs.$name.${pair%%:*}.ember > /dev/null
    /usr/bin/python3 bench/llama/gguf_write.py "$src" --type "${pair##*:}" --n-head "$heads" -o bench/out/llama/$name.${pair##*:}.gguf > /dev/null
  done
done

tag() {  # tag JSON_LINE FIELDS...: prepends "k":"v" fields to a JSON object line
  local line=$1; shift
  local pre=""
  for kv in "$@"; do pre+="\"${kv%%=*}\":\"${kv#*=}\","; done
  echo "{$pre${line#\{}"
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

for spec in "${models[@]}"; do
  read -r name src heads window tok prompt <<< "$spec"
  echo "$name $(uptime)" >> $out/load.txt
  short=$(( window / 4 < 200 ? window / 4 : 200 ))
  long=$(( window - 1 ))
  n_rounds=$rounds; [[ $name == gpt2 ]] && n_rounds=1
  for round in $(seq 1 "$n_rounds"); do
    for th in 1 2; do
      for pair in int8:q8_0 f16:f16; do
        e=bench/out/vs.$name.${pair%%:*}.ember; g=bench/out/llama/$name.${pair##*:}.gguf
        common=(model=$name round=$round pair=$pair)
        # short context (and the prefill of one window), then long context (prefill of 16 only)
        for ctx in short long; do
          n=$short; p=$window; [[ $ctx == long ]] && { n=$long; p=16; }
          l=$(/usr/bin/time -f %M -o $out/rss.txt $ember bench -m $e -p $p -n $n --prefill-logits last --runs 1 --threads $th --json)
          tag "$l" "${common[@]}" ctx=$ctx rss_kb="$(cat $out/rss.txt)" >> $out/bench.jsonl
          l=$(/usr/bin/time -f %M -o $out/rss.txt $driver -m $g -p $p -n $n --runs 1 -t $th)
          tag "$l" "${common[@]}" ctx=$ctx rss_kb="$(cat $out/rss.txt)" >> $out/bench.jsonl
        done
      done
    done
  done
  # start-up: process start to the first token, 5 alternations, one thread
  for pair in int8:q8_0 f16:f16; do
    e=bench/out/vs.$name.${pair%%:*}.ember; g=bench/out/llama/$name.${pair##*:}.gguf
    for i in 1 2 3 4 5; do
      t0=$(now_ms); $ember generate -m $e -p "$prompt" -n 1 --threads 1 > /dev/null; t1=$(now_ms)
      echo "{\"engine\":\"ember\",\"model\":\"$name\",\"pair\":\"$pair\",\"wall_ms\":$((t1 - t0))}" >> $out/startup.jsonl
      t0=$(now_ms); l=$($driver -m $g -t 1 --first-token); t1=$(now_ms)
      tag "$l" model=$name pair=$pair wall_ms=$((t1 - t0)) >> $out/startup.jsonl
    done
  done
  # PyTorch (gpt.py's generate) on the lecture's models, one thread
  if [[ $name != gpt2 ]]; then
    l=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/peer_torch.py "$src" --threads 1)
    tag "$l" model=$name >> $out/torch.jsonl
  fi
done
echo "end $(uptime)" >> $out/load.txt
bench/out/membw >> $out/membw.jsonl
/usr/bin/python3 bench/llama_report.py $out > bench/llama_results.md
cat bench/llama_results.md
