#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (doctest suites under ctest):
# first the Release build, then the same suites built with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/; any report fails the run).
# Then the whole project cross-built for aarch64, every test under qemu (scripts/cross-aarch64.sh).
# Then every libFuzzer target (clang, build-fuzz/) for 60 s each (tests/fuzz/run.sh 60); a
# crash, a leak, a timeout or a sanitizer report fails the run.
#   scripts/test.sh            all four
#   scripts/test.sh --no-asan  without the ASan + UBSan pass
#   scripts/test.sh --no-cross without the aarch64 pass
#   scripts/test.sh --no-fuzz  without the fuzzing pass
# Each pass ends with a line "--- took N s: WHAT", so a CI log gives the cost of each.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
took() { echo "--- took $((SECONDS - start)) s: $1"; start=$SECONDS; }
scripts/install-deps.sh
took "install-deps.sh"
scripts/build.sh
took "the Release build"
(cd build && ctest --output-on-failure -j 2)
took "the Release build's tests"
if [[ " $* " != *" --no-asan "* ]]; then
  echo "--- the same tests under ASan + UBSan"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
  cmake --build build-asan -j "$(nproc)" >> build-asan.log 2>&1 || { tail -50 build-asan.log; exit 1; }
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j 2)
  took "the ASan + UBSan build and its tests"
fi
if [[ " $* " != *" --no-cross "* ]]; then
  echo "--- the whole project for aarch64, tests under qemu-aarch64"
  scripts/cross-aarch64.sh
  took "the aarch64 build and its tests under qemu"
fi
if [[ " $* " != *" --no-fuzz "* ]]; then
  echo "--- every fuzz target for 60 s (clang, libFuzzer, ASan + UBSan)"
  tests/fuzz/run.sh 60
  took "the fuzz build and every target"
fi
