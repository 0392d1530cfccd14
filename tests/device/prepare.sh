#!/usr/bin/env bash
# Run HERE (the Debian 12 development machine), before a device call: builds what
# tests/device/run.sh runs on the GPU machine, which has no network and none of ember's
# Debian build dependencies (FlatBuffers, CLI11, doctest, libzip, ...), into .device-carry/
# (ignored by git; carried with the `run` tool's `carry`, at most 64 MiB):
#   .device-carry/bin/ember, .device-carry/bin/ember_cuda_tests   (Release, sm_90, -march=x86-64-v3)
#   .device-carry/lib/libember-cuda.so   the CUDA backend module (found from bin/ as ../lib)
#   .device-carry/lib/   the shared libraries they need beyond glibc and cuBLASLt
#   .device-carry/shared/data/tinyshakespeare.txt   (the default model's eval test)
#   tests/device/prepare.sh [CUDA_ARCHITECTURES]   (default 90, the H200; 87 for an Orin)
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${1:-90}
scripts/install-deps.sh
echo "configuring build-device/ (CUDA architectures $arch)"
# -march=x86-64-v3 (AVX2, FMA, F16C: any server CPU of the last decade) rather than the
# -march=native of this machine: the CPU backend's fast paths run there too (the tests compare
# against it), and nothing the GPU machine's CPU may lack is used.
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DEMBER_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DEMBER_CUDA=ON -DEMBER_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" > build-device.log 2>&1 || { cat build-device.log; exit 1; }
echo "building ember, the CUDA module and ember_cuda_tests (a few minutes on 2 cores)"
cmake --build build-device -j 2 --target ember ember-cuda ember_cuda_tests >> build-device.log 2>&1 || { tail -50 build-device.log; exit 1; }
rm -rf .device-carry
mkdir -p .device-carry/bin .device-carry/lib .device-carry/lib-std .device-carry/shared/data
cp build-device/cli/ember build-device/tests/ember_cuda_tests .device-carry/bin/
cp build-device/lib/libember-cuda.so .device-carry/lib/
strip .device-carry/bin/* .device-carry/lib/libember-cuda.so 2>/dev/null || true
# Shared libraries: everything ldd resolves except glibc's own, the dynamic loader and CUDA's
# (cuBLASLt comes from the GPU machine's CUDA; cudart is linked statically).
for bin in .device-carry/bin/* .device-carry/lib/libember-cuda.so; do
  ldd "$bin" | awk '/=>/ {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcublas*|libcudart*) ;;
    libstdc++.so*|libgcc_s.so*) cp -L "$lib" .device-carry/lib-std/ ;;  # used there only if its own are older
    *) cp -L "$lib" .device-carry/lib/ ;;
  esac
done
data=../shared/data/tinyshakespeare.txt
[[ -n "${EMBER_SHARED_DIR:-}" ]] && data=$EMBER_SHARED_DIR/data/tinyshakespeare.txt
if [[ -f $data ]]; then cp "$data" .device-carry/shared/data/; else echo "warning: $data not found: the eval test will fail there"; fi
git log -1 --format='built from %H (%s)' > .device-carry/BUILD_INFO
git status --short | grep -v '^??' | sed 's/^/uncommitted: /' >> .device-carry/BUILD_INFO || true
ls -l .device-carry/bin .device-carry/lib .device-carry/lib-std
du -sh .device-carry
echo "ready: run tests/device/run.sh on the GPU machine with carry [\".device-carry\"] (tests/device/README.md)"
