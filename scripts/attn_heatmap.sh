#!/usr/bin/env bash
# Makes docs/attn.png, the README's attention picture: `ember attn --png` on the shipped
# Shakespeare model (converted to f32) for the opening of tinyshakespeare, every head of one
# layer in a grid.
#   scripts/attn_heatmap.sh [LAYER]     (default 2; needs build/cli/ember: scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
layer="${1:-2}"
ember=build/cli/ember
[[ -x $ember ]] || { echo "attn_heatmap.sh: $ember is missing: run scripts/build.sh first" >&2; exit 1; }
mkdir -p build/models docs
model=build/models/shakespeare_char_f32.ember
# The converter's report and its note on the attention scale are not this script's output;
# on failure its messages are shown.
if [[ ! -f $model ]]; then
  log=$($ember convert models/shakespeare_char.pt --vocab-text models/shakespeare_char.vocab.txt --dtype f32 -o "$model" 2>&1) ||
    { echo "$log" >&2; exit 1; }
fi
# The first 41 characters of ../shared/data/tinyshakespeare.txt.
prompt=$'First Citizen:\nBefore we proceed any further'
prompt="${prompt:0:41}"
text=$($ember attn -m "$model" -p "$prompt" --layer "$layer" --png docs/attn.png --top 2)
echo "$text" | sed -n 1,12p
