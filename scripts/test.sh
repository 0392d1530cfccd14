#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (doctest suites under ctest):
# first the Release build, then the same suites built with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/; any report fails the run).
#   scripts/test.sh            both
#   scripts/test.sh --no-asan  the Release build only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j 2)
if [[ "${1:-}" != "--no-asan" ]]; then
  echo "--- the same tests under ASan + UBSan"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
  cmake --build build-asan -j "$(nproc)" >> build-asan.log 2>&1 || { tail -50 build-asan.log; exit 1; }
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest --output-on-failure -j 2)
fi
