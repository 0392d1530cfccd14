#!/usr/bin/env bash
# Builds and runs bench/int8_decode_rate.cpp: the int8 decode kernel's read rate (one thread)
# against a plain stream read of the same bytes, from L1, L2, L3 and DRAM. About 15 seconds. On a CPU
# with AVX2, then bench/avx2_dot_ab.cpp: the avx2 dot product before and after 2026-12-07,
# interleaved in one process. About 20 seconds more.
#   bench/decode_kernel.sh        (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/kernels/libember_kernels.a ]] || { echo "bench/decode_kernel.sh: build first (scripts/build.sh)" >&2; exit 1; }
mkdir -p bench/out
g++ -O3 -march=native -std=c++17 -I. bench/int8_decode_rate.cpp build/kernels/libember_kernels.a -pthread -o bench/out/int8_decode_rate
grep -m1 "model name" /proc/cpuinfo
bench/out/int8_decode_rate
if grep -qw avx2 /proc/cpuinfo; then
  g++ -O3 -mavx2 -mfma -mf16c -std=c++17 -I. bench/avx2_dot_ab.cpp -o bench/out/avx2_dot_ab
  bench/out/avx2_dot_ab
fi
