#!/usr/bin/env bash
# Installs llama.cpp as npm's node-llama-cpp 3.21.1 ships it (prebuilt libllama / libggml with
# one CPU variant per x86-64 level, chosen by ggml at run time) under bench/out/llama, clones
# the llama.cpp source bundled with it (for include/llama.h and ggml/include), and builds
# bench/llama/llama_bench.cpp against the two with g++ (rpath to the prebuilt libraries).
# Idempotent; prints the driver's path.
#   bench/llama/setup.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=bench/out/llama
pkg=$root/node_modules/node-llama-cpp
[[ -f $pkg/package.json ]] || npm i -E --prefix $root --no-audit --no-fund node-llama-cpp@3.21.1 >&2
libs=$(cd $root/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64 && pwd)
[[ -f $root/src/include/llama.h ]] || git clone -q $pkg/llama/gitRelease.bundle $root/src 2>/dev/null
out=$root/llama_bench
if [[ ! -x $out || bench/llama/llama_bench.cpp -nt $out ]]; then
  g++ -std=c++17 -O2 -Wall -Wextra -I$root/src/include -I$root/src/ggml/include bench/llama/llama_bench.cpp \
    -o $out -L"$libs" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -ldl -Wl,-rpath,"$libs"
fi
echo $out
