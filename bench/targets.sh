#!/usr/bin/env bash
# Issue 13's CPU targets in one run, this build against a peer build (--peer, e.g. an older
# commit's ember) measured in the same run, rounds interleaved:
#   the lecture's full configuration int8 (tools/make_bench_model.py): decode (255 tokens from
#     one) and prefill (one window of 256, every row's logits) with 1 and 2 threads;
#   GPT-2 124M shape int8 (tools/make_gpt2_bench_model.py), 2 threads: prefill of a 1024 window
#     (every row's logits, and the last row's: the prompt path) and decode of 255 tokens from one;
#   the read bandwidth (bench/membw.cpp) over a buffer the size of each model's weights (12 MiB:
#     the full configuration's 11.4 MB sit in L2 + L3 here; 1 GiB: DRAM, GPT-2's 132 MB), before
#     and after, which bounds decode: tok/s <= bandwidth / weight bytes per token; and the DRAM
#     rate right before and after each GPT-2 decode run, which that run is compared with.
# `uptime` is recorded with every round. Writes bench/targets_results.md (or --out FILE: one file
# per machine, e.g. bench/targets_results_epyc.md) and prints it.
#   bench/targets.sh [--rounds N] [--peer PATH_TO_EMBER] [--out FILE]   (about 4 minutes for 2 rounds)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
rounds=2
bins=(build/cli/ember)
results=bench/targets_results.md
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --peer) bins+=("$2"); shift 2 ;;
    --out) results=$2; shift 2 ;;
    *) echo "usage: bench/targets.sh [--rounds N] [--peer PATH_TO_EMBER] [--out FILE]" >&2; exit 1 ;;
  esac
done
for b in "${bins[@]}"; do
  [[ -x $b ]] || { echo "bench/targets.sh: $b not found (build first: scripts/build.sh)" >&2; exit 1; }
done
mkdir -p bench/out
full=bench/out/full.int8.ember
gpt2=bench/out/gpt2-124m.int8.ember
if [[ ! -f $full ]]; then
  [[ -f bench/out/gptpy_full.pt ]] || /usr/bin/python3 tools/make_bench_model.py -o bench/out/gptpy_full.pt --text models/shakespeare_char.vocab.txt
  build/cli/ember convert bench/out/gptpy_full.pt --vocab-text models/shakespeare_char.vocab.txt --dtype int8 -o $full > /dev/null
fi
if [[ ! -f $gpt2 ]]; then
  [[ -f bench/out/gpt2-124m/model.safetensors ]] || /usr/bin/python3 tools/make_gpt2_bench_model.py -o bench/out/gpt2-124m
  build/cli/ember convert bench/out/gpt2-124m/model.safetensors --tokenizer tests/fixtures/gpt2/tokenizer --dtype int8 -o $gpt2 > /dev/null
fi
g++ -O3 -march=native -pthread bench/membw.cpp -o bench/out/membw
out=bench/out/targets.jsonl
: > $out
# membw WHEN FIELDS MIB...: bench/membw.cpp over each buffer size, its JSON lines tagged with
# WHEN and FIELDS (more "key":value, pairs, each ending in a comma, or empty).
membw() {
  local when=$1 fields=$2
  shift 2
  for mib in "$@"; do bench/out/membw "$mib" | sed "s|^{|{\"kind\":\"membw\",\"when\":\"$when\",$fields|" >> $out; done
}
tag() { sed "s|^{|{\"kind\":\"bench\",\"bin\":\"$1\",\"model\":\"$2\",\"case\":\"$3\",\"round\":$4,\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",|" >> $out; }
membw before '' 12 1024
for round in $(seq 1 "$rounds"); do
  for b in "${bins[@]}"; do
    for th in 1 2; do
      $b bench -m $full --threads $th --runs 5 --json | tag "$b" full "threads $th" "$round"
    done
    $b bench -m $gpt2 --threads 2 --runs 2 -p 1024 -n 1 --json | tag "$b" gpt2 "prefill all" "$round"
    if $b bench --help 2>&1 | grep -q prefill-logits; then
      $b bench -m $gpt2 --threads 2 --runs 2 -p 1024 -n 1 --prefill-logits last --json | tag "$b" gpt2 "prefill last" "$round"
    fi
    # The DRAM rate right before and right after each GPT-2 decode run: this VM's rate moves by
    # half within minutes, so each run is compared with the rate around it as well.
    membw "decode before" "\"round\":$round,\"bin\":\"$b\"," 1024
    $b bench -m $gpt2 --threads 2 --runs 1 -p 1 -n 255 --json | tag "$b" gpt2 "decode" "$round"
    membw "decode after" "\"round\":$round,\"bin\":\"$b\"," 1024
  done
done
membw after '' 12 1024
/usr/bin/python3 bench/targets_report.py $out "${bins[@]}" > "$results"
cat "$results"
