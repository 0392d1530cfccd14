#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS (default 60), seeded from committed files: tests/fuzz/seeds/ and the test fixtures.
# New inputs found go to build-fuzz/corpus/TARGET; a crash writes build-fuzz/crash-* and
# fails the run.
#   tests/fuzz/run.sh [SECONDS] [TARGET ...]   targets: unpickler checkpoint safetensors meta_pkl ember tokenizer bpe frame console_line adapter
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(unpickler checkpoint safetensors meta_pkl ember tokenizer bpe frame console_line adapter)
scripts/install-deps.sh
# clang and its libFuzzer runtime (Debian 12: clang 14)
if ! command -v clang++ > /dev/null || ! dpkg -s libclang-rt-14-dev > /dev/null 2>&1; then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get install -y -qq clang libclang-rt-14-dev > /dev/null
fi
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DEMBER_FUZZ=ON -DEMBER_TESTS=OFF > build-fuzz.log 2>&1 || { cat build-fuzz.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" >> build-fuzz.log 2>&1 || { tail -40 build-fuzz.log; exit 1; }

seeds() {  # the committed seed folders of a target
  case $1 in
    unpickler)  echo tests/fuzz/seeds/unpickler tests/fixtures/reader ;;
    checkpoint) echo tests/fixtures/reader tests/fixtures/bad ;;
    safetensors) echo tests/fixtures/reader tests/fixtures/gptpy tests/fixtures/gpt2/hf tests/fixtures/bad ;;
    meta_pkl)   echo tests/fuzz/seeds/unpickler tests/fixtures/nanogpt ;;
    ember)      echo tests/fuzz/seeds/ember ;;
    tokenizer)  echo tests/fuzz/seeds/tokenizer ;;
    bpe)        echo tests/fuzz/seeds/bpe ;;
    frame)      echo tests/fuzz/seeds/frame ;;
    console_line) echo tests/fuzz/seeds/console_line ;;
    adapter)    echo tests/fuzz/seeds/adapter ;;
  esac
}
for t in "${targets[@]}"; do
  mkdir -p build-fuzz/corpus/$t
  echo "--- fuzz_$t for ${seconds} s"
  # shellcheck disable=SC2046
  build-fuzz/tests/fuzz/fuzz_$t build-fuzz/corpus/$t $(seeds $t) -max_total_time="$seconds" -max_len=131072 \
    -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build-fuzz/crash-$t- -print_final_stats=1 2>&1 | tail -12
done
