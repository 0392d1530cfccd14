// The CUDA backend as a module: libember-cuda.so (built with EMBER_CUDA) holds the CUDA
// backend, the kernels of kernels/cuda, the CUDA runtime and cuBLASLt. The runtime opens it
// with dlopen only when a session asks for CUDA, or when `auto` sees a GPU device node
// (/dev/nvidiactl, /dev/nvidia0; on a Jetson /dev/nvhost-ctrl-gpu or /dev/nvgpu/igpu0/ctrl), in
// the manner of ggml's dynamically loaded backends: a CPU process never maps a CUDA library.
//
// Where the module is looked for, in order: $EMBER_CUDA_MODULE (a path; only there when set);
// beside the binary or library that holds the runtime, and in its ../lib and
// ../<install libdir>; then the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache).
// Once opened the module stays loaded for the life of the process (the loader counts it;
// the CUDA runtime inside must not be torn down under live sessions).
#pragma once

#include <memory>
#include <string>

#include "runtime/backend.h"

namespace ember {

class Model;
struct SessionOptions;

// The module's one exported symbol returns this table. Both sides are built from one source
// tree; abi guards against a module from another build (kCudaModuleAbi mixes the version and
// the sizes of the types that cross).
struct CudaModuleApi {
    unsigned long abi = 0;
    int (*device_count)() = nullptr;  // cudaGetDeviceCount, 0 on any error; never throws
    // Device 0; false with *error set when there is none or a call fails. Never throws.
    bool (*device_info)(CudaDeviceInfo* out, std::string* error) = nullptr;
    // A new CUDA backend, or nullptr with *error set (no device, out of memory, a limit of the
    // kernels, a failing call). Never throws; the backend's own methods throw ember::Error.
    Backend* (*create)(const Model& model, const SessionOptions& opts, std::string* error) = nullptr;
};
unsigned long cuda_module_abi();
extern "C" {
typedef const CudaModuleApi* (*EmberCudaModuleFn)();
}
constexpr const char* kCudaModuleSymbol = "ember_cuda_module";
constexpr const char* kCudaModuleFile = "libember-cuda.so";

// Auto's test: a GPU device node exists, the module loads and counts at least one device.
// Never throws; false on any failure.
bool cuda_available();
// Devices the module counts; 0 when the module cannot be loaded. Never throws.
int cuda_device_count();
// Throws ember::Error when the module cannot be loaded or there is no device.
CudaDeviceInfo cuda_device_info();
// Throws ember::Error: "the CUDA backend module libember-cuda.so cannot be loaded: ...",
// "no CUDA device found (use --backend cpu)", or the module's own refusal.
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const SessionOptions& opts);

}  // namespace ember
