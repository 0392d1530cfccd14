#!/usr/bin/env bash
# Builds and runs bench/int8_decode_rate.cpp: the int8 decode kernel's read rate (one thread)
# against a plain stream read of the same bytes, from L1, L2 and L3. About 30 seconds.
#   bench/decode_kernel.sh        (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/kernels/libember_kernels.a ]] || { echo "bench/decode_kernel.sh: build first (scripts/build.sh)" >&2; exit 1; }
mkdir -p bench/out
g++ -O3 -march=native -std=c++17 -I. bench/int8_decode_rate.cpp build/kernels/libember_kernels.a -pthread -o bench/out/int8_decode_rate
grep -m1 "model name" /proc/cpuinfo
bench/out/int8_decode_rate
