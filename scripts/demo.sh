#!/usr/bin/env bash
# Installs what is missing, builds, converts the shipped Shakespeare model to int8 and
# generates 500 characters from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p build/models
build/cli/ember convert models/shakespeare_char.pt --vocab-text models/shakespeare_char.vocab.txt \
  --dtype int8 -o build/models/shakespeare_char.ember
echo "--- ember generate -m build/models/shakespeare_char.ember -n 500 --seed 1337"
build/cli/ember generate -m build/models/shakespeare_char.ember -n 500 --seed 1337
