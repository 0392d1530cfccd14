#!/usr/bin/env bash
# ember against PyTorch on the same checkpoint, in the same run, on this machine:
# the lecture's full configuration (n_layer 6, n_head 6, n_embd 384, block_size 256, vocab 65,
# random weights), converted to int8, f16 and f32. PyTorch runs gpt.py's own generate
# (crop to block_size, full forward per token), as a user of the lecture would.
# Writes bench/results.md (a Markdown table) and prints it.
#   bench/run.sh [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=9
[[ "${1:-}" == "--runs" ]] && runs=$2
scripts/install-deps.sh --tools
scripts/build.sh
mkdir -p bench/out
ckpt=bench/out/gptpy_full.pt
[[ -f $ckpt ]] || /usr/bin/python3 tools/make_bench_model.py -o $ckpt --text models/shakespeare_char.vocab.txt
results=bench/out/results.jsonl
: > $results
for dt in int8 f16 f32; do
  build/cli/ember convert $ckpt --vocab-text models/shakespeare_char.vocab.txt --dtype $dt -o bench/out/full.$dt.ember > /dev/null
  for th in 1 2; do
    build/cli/ember bench -m bench/out/full.$dt.ember --threads $th --runs "$runs" --json | sed "s/^{/{\"dtype\":\"$dt\",/" >> $results
  done
done
# PyTorch's baseline: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines here) slow it.
for th in 1 2; do
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/peer_torch.py $ckpt --threads $th >> $results
done
# The same int8 figure again, ten times a few seconds apart: on a shared machine one run can
# land in a slow or a fast moment, so the table's int8 line is followed by its spread.
spread=bench/out/spread.jsonl
: > $spread
for i in $(seq 1 10); do
  build/cli/ember bench -m bench/out/full.int8.ember --threads 2 --runs "$runs" --json >> $spread
  sleep 2
done
/usr/bin/python3 bench/report.py $results $spread > bench/results.md
cat bench/results.md
