#!/usr/bin/env bash
# The fine-tuning loss curve of the README: the default model (int8) fine-tuned with LoRA on
# Alice's Adventures in Wonderland, logged with `ember finetune --log`, plotted by
# bench/finetune_plot.py into docs/finetune_loss.png. The CSV and the run's output stay in
# bench/out/ (ignored by git); `uptime` is recorded before and after (the tokens/s column
# depends on the machine's load, the losses do not).
#   bench/finetune_loss.sh [--steps N]     (default 300 steps: about 3 minutes on 2 quiet cores)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
steps=300
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: bench/finetune_loss.sh [--steps N]" >&2; exit 1 ;;
  esac
done
ember=build/cli/ember
[[ -x $ember ]] || { echo "bench/finetune_loss.sh: $ember not found (build first: scripts/build.sh)" >&2; exit 1; }
mkdir -p bench/out docs
model=bench/out/shakespeare_int8.ember
$ember convert models/shakespeare_char.pt --vocab-text models/shakespeare_char.vocab.txt --dtype int8 -o $model > /dev/null
rm -f bench/out/finetune_loss.csv
uptime > bench/out/finetune_loss.load.txt
$ember finetune -m $model --text ../shared/data/alice.txt --skip-unknown -o bench/out/alice.emba \
  --steps "$steps" --eval-every 25 --log-every 25 --log bench/out/finetune_loss.csv | tee bench/out/finetune_loss.log
uptime >> bench/out/finetune_loss.load.txt
/usr/bin/python3 bench/finetune_plot.py bench/out/finetune_loss.csv docs/finetune_loss.png
echo "wrote docs/finetune_loss.png (from bench/out/finetune_loss.csv; load: bench/out/finetune_loss.load.txt)"
