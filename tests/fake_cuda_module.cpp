// Shared libraries that are not ember's CUDA module, for test_backend.cpp's loader test: by
// default one without the module's symbol; with EMBER_FAKE_OLD_ABI one whose table carries
// another build's abi (0, which cuda_module_abi() never is).
#include "runtime/cuda_module.h"

#ifdef EMBER_FAKE_OLD_ABI
extern "C" __attribute__((visibility("default"))) const ember::CudaModuleApi* ember_cuda_module() {
    static const ember::CudaModuleApi api{};
    return &api;
}
#else
extern "C" __attribute__((visibility("default"))) int ember_fake_module() { return 1; }
#endif
