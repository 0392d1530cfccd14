#!/usr/bin/env bash
# Builds the whole project (kernels, runtime, converter, the ember command, firmware, both
# test suites) for aarch64, the Jetson's CPU, with Debian's cross toolchain, CPU only, and runs
# every test under qemu-user: ember_tests (against the PyTorch fixtures) and
# ember_firmware_tests with -cpu max (NEON + dotprod + i8mm), then all of them again on a
# Cortex-A57 (NEON, no dotprod), so every int8 kernel runs. The tests that run `ember` and
# `ember-console` run them through qemu too (binfmt_misc is not needed). Installs what is
# missing: g++-aarch64-linux-gnu, qemu-user and the arm64 libraries through multiarch.
#   scripts/cross-aarch64.sh              build into build-aarch64/ and run the tests
#   scripts/cross-aarch64.sh --no-tests   build only
# The result: build-aarch64/firmware/ember-console and build-aarch64/cli/ember (copy them to the Jetson).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
pkgs=(g++-aarch64-linux-gnu qemu-user libssl-dev:arm64 libxxhash-dev:arm64 libflatbuffers-dev:arm64 zlib1g-dev:arm64 libzip-dev:arm64
      libpng-dev:arm64 libgd3:arm64)   # ember attn --png (libgd3 opened at run time, by its tests too)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DEMBER_NATIVE=OFF -DEMBER_DEVICE_ONLY=OFF -DEMBER_CUDA=OFF > build-aarch64.log 2>&1 || { cat build-aarch64.log; exit 1; }
cmake --build build-aarch64 -j "$(nproc)" >> build-aarch64.log 2>&1 || { tail -50 build-aarch64.log; exit 1; }
file build-aarch64/firmware/ember-console 2>/dev/null || true
echo "built: build-aarch64/firmware/ember-console, build-aarch64/cli/ember"
if [[ "${1:-}" != "--no-tests" ]]; then
  # The tests that run `ember` and `ember-console` run them through qemu-aarch64 as well
  # (EMBER_EMULATOR); the default model's full validation loss is skipped there (a MESSAGE says so).
  echo "--- every test under qemu-aarch64 -cpu max (NEON + dotprod + i8mm)"
  (cd build-aarch64 && QEMU_CPU=max EMBER_EXPECT_CPU_LEVEL=i8mm ctest --output-on-failure -j 2)
  # Every test again on a CPU without dotprod (a Cortex-A57: NEON only), so that the NEON int8
  # kernels run everywhere the dotprod ones ran above, the command-line tests' ember included
  # (qemu-aarch64 reads QEMU_CPU). About 2 minutes with 2 jobs. EMBER_EXPECT_CPU_LEVEL: the level
  # each emulated CPU must be detected at (a test case checks it).
  echo "--- every test under qemu-aarch64 -cpu cortex-a57 (NEON, no dotprod)"
  (cd build-aarch64 && QEMU_CPU=cortex-a57 EMBER_EXPECT_CPU_LEVEL=neon ctest --output-on-failure -j 2)
fi
