#include "runtime/backend.h"

#include "runtime/error.h"
#ifdef EMBER_HAVE_CUDA
#include "runtime/cuda_session.h"
#endif

namespace ember {

Backend parse_backend(const std::string& s) {
    if (s == "cpu") return Backend::Cpu;
    if (s == "cuda") return Backend::Cuda;
    if (s == "auto") return Backend::Auto;
    fail("backend '", s, "' is unknown (cpu, cuda or auto)");
}

const char* backend_name(Backend b) { return b == Backend::Cpu ? "cpu" : b == Backend::Cuda ? "cuda" : "auto"; }

#ifdef EMBER_HAVE_CUDA
int cuda_device_count() { return cuda_devices(); }
CudaDeviceInfo cuda_device_info() { return cuda_device(); }
#else
int cuda_device_count() { return 0; }
CudaDeviceInfo cuda_device_info() { fail("ember was built without CUDA (configure with -DEMBER_CUDA=ON where nvcc is installed)"); }
#endif

Backend resolve_backend(Backend b) {
    if (b != Backend::Auto) return b;
    return cuda_device_count() > 0 ? Backend::Cuda : Backend::Cpu;
}

std::unique_ptr<Generator> make_session(const Model& model, const SessionOptions& opts, Backend backend) {
    // LoRA adapters run on the CPU backend only: auto takes the CPU, cuda is refused.
    if (opts.adapter && backend == Backend::Auto) backend = Backend::Cpu;
    if (resolve_backend(backend) == Backend::Cpu) return std::make_unique<Session>(model, opts);
    if (opts.adapter) fail("--adapter: LoRA adapters run on the CPU backend only so far; use --backend cpu (or auto)");
#ifdef EMBER_HAVE_CUDA
    return std::make_unique<CudaSession>(model, opts);
#else
    fail("ember was built without CUDA (configure with -DEMBER_CUDA=ON where nvcc is installed); use --backend cpu");
#endif
}

}  // namespace ember
