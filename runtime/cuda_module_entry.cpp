// The one exported symbol of libember-cuda.so (cuda_module.h): the table through which the
// runtime reaches the CUDA backend. Exceptions stop here; the backend's methods may throw
// ember::Error to the caller (both sides share libstdc++).
#include <exception>

#include "runtime/cuda_backend.h"
#include "runtime/cuda_module.h"

namespace {

int device_count() { return ember::cuda_devices(); }

bool device_info(ember::CudaDeviceInfo* out, std::string* error) {
    try {
        *out = ember::cuda_device();
        return true;
    } catch (const std::exception& e) {
        *error = e.what();
        return false;
    }
}

ember::Backend* create(const ember::Model& model, const ember::SessionOptions& opts, std::string* error) {
    try {
        return new ember::CudaBackend(model, opts);
    } catch (const std::exception& e) {
        *error = e.what();
        return nullptr;
    }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ember::CudaModuleApi* ember_cuda_module() {
    static const ember::CudaModuleApi api{ember::cuda_module_abi(), &device_count, &device_info, &create};
    return &api;
}
