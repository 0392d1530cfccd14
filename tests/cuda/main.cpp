// ember_cuda_tests: the CUDA suites (built with EMBER_CUDA). Without a CUDA device the binary
// runs only the test suite "cuda-host" (checks that need no GPU), prints "SKIPPED: no CUDA
// device" and exits 77, which ctest's SKIP_RETURN_CODE shows as "Skipped" in its summary (a
// run that tested nothing on the GPU never reads as passed); a failing host check exits 1.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <exception>

#include "runtime/cuda_module.h"

int main(int argc, char** argv) {
    const int devices = ember::cuda_device_count();
    if (devices < 1) {
        // Only the suite that needs no GPU (the memory plan); then report the rest skipped.
        doctest::Context host(argc, argv);
        host.addFilter("test-suite", "cuda-host");
        const int rc = host.run();
        if (rc != 0 || host.shouldExit()) return rc;
        std::printf("SKIPPED: no CUDA device: the GPU tests did not run (only the host suite above; see tests/device/README.md)\n");
        return 77;
    }
    try {
        const ember::CudaDeviceInfo info = ember::cuda_device_info();
        std::printf("CUDA device 0 of %d: %s (sm_%d%d, %zu MiB, %.0f GB/s peak)\n", devices, info.name.c_str(), info.major,
                    info.minor, info.total_bytes >> 20, info.peak_bytes_per_s / 1e9);
    } catch (const std::exception& e) {
        std::printf("FAILED: cannot read CUDA device 0: %s\n", e.what());
        return 1;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
