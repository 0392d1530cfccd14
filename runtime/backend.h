// Choosing where a model runs: `--backend cpu | cuda | auto` (auto = CUDA when this build has
// it and a CUDA device is present, else the CPU).
#pragma once

#include <memory>
#include <string>

#include "runtime/generator.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace ember {

enum class Backend { Cpu, Cuda, Auto };
Backend parse_backend(const std::string& s);  // throws ember::Error
const char* backend_name(Backend b);

// Number of CUDA devices: 0 when there is none, when the driver is missing, or when ember
// was built without CUDA. Never throws.
int cuda_device_count();
// Cpu or Cuda: Auto resolved as above.
Backend resolve_backend(Backend b);

// The device a CUDA session runs on (device 0).
struct CudaDeviceInfo {
    std::string name;            // e.g. "NVIDIA H200"
    int major = 0, minor = 0;    // compute capability
    double peak_bytes_per_s = 0; // memory bandwidth from the memory clock and bus width
    size_t total_bytes = 0;      // device memory
};
// Throws ember::Error without a device or without CUDA in this build.
CudaDeviceInfo cuda_device_info();

// A session for `model` on `backend` (Auto resolved). opts.threads is the CPU's; the CUDA
// session ignores it. Throws ember::Error, e.g. "ember was built without CUDA" or "no CUDA
// device" for Cuda. With opts.adapter (LoRA, CPU only) Auto means Cpu and Cuda is refused.
std::unique_ptr<Generator> make_session(const Model& model, const SessionOptions& opts, Backend backend);

}  // namespace ember
