#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS (default 60), seeded from committed files: tests/fuzz/seeds/ and the test fixtures.
# New inputs found go to build-fuzz/corpus/TARGET; a crash writes build-fuzz/crash-* and
# fails the run. Targets run side by side, one per core.
#   tests/fuzz/run.sh [SECONDS] [TARGET ...]   targets: unpickler checkpoint safetensors meta_pkl ember tokenizer tokenizer_json bpe frame console_line line_editor adapter
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(unpickler checkpoint safetensors meta_pkl ember tokenizer tokenizer_json bpe frame console_line line_editor adapter)
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
    tokenizer_json) echo tests/fuzz/seeds/tokenizer_json ;;
    bpe)        echo tests/fuzz/seeds/bpe ;;
    frame)      echo tests/fuzz/seeds/frame ;;
    console_line) echo tests/fuzz/seeds/console_line ;;
    line_editor) echo tests/fuzz/seeds/line_editor ;;
    adapter)    echo tests/fuzz/seeds/adapter ;;
  esac
}
run_one() {  # runs one target; its output goes to build-fuzz/log-TARGET.txt
  local t=$1
  mkdir -p build-fuzz/corpus/$t
  # shellcheck disable=SC2046
  build-fuzz/tests/fuzz/fuzz_$t build-fuzz/corpus/$t $(seeds $t) -max_total_time="$seconds" -max_len=131072 \
    -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build-fuzz/crash-$t- -print_final_stats=1 > build-fuzz/log-$t.txt 2>&1
}
# One target per core at a time; a target's report is printed when it ends.
jobs_max=$(nproc)
declare -A pid_of
failed=()
report() {  # report TARGET STATUS
  echo "--- fuzz_$1 for ${seconds} s: $([[ $2 -eq 0 ]] && echo "no finding" || echo "FAILED (exit $2)")"
  tail -12 build-fuzz/log-$1.txt
  [[ $2 -eq 0 ]] || failed+=("$1")
}
wait_for() {  # waits for TARGET's run and reports it
  local rc=0
  wait "${pid_of[$1]}" || rc=$?
  report "$1" "$rc"
  unset "pid_of[$1]"
}
running=()
for t in "${targets[@]}"; do
  if ((${#running[@]} >= jobs_max)); then
    wait_for "${running[0]}"
    running=("${running[@]:1}")
  fi
  run_one "$t" &
  pid_of[$t]=$!
  running+=("$t")
done
for t in "${running[@]}"; do wait_for "$t"; done
if ((${#failed[@]})); then
  echo "fuzzing found something in: ${failed[*]} (inputs: build-fuzz/crash-*)"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, no finding"
