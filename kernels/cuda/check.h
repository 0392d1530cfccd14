// Error checks for CUDA runtime and cuBLASLt calls. A failing call throws ember::Error whose
// message names the call, the file and line, and the library's own error name and text:
//   EMBER_CUDA_CHECK(cudaMemcpyAsync(...));   EMBER_CUBLAS_CHECK(cublasLtMatmul(...));
// Kernel launches are checked with EMBER_CUDA_CHECK(cudaGetLastError()) right after them.
// Library code only throws; the commands turn the Error into one line and an exit status.
// (runtime/error.h is header-only: the kernels use its Error type and nothing else of runtime/.)
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "runtime/error.h"

namespace ember::cuda {

[[noreturn]] inline void fail_cuda(cudaError_t e, const char* call, const char* file, int line) {
    fail("CUDA call ", call, " failed at ", file, ":", line, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

inline const char* cublas_status_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS status";
    }
}

[[noreturn]] inline void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
    fail("cuBLASLt call ", call, " failed at ", file, ":", line, ": ", cublas_status_name(s), " (", static_cast<int>(s), ")");
}

}  // namespace ember::cuda

#define EMBER_CUDA_CHECK(call)                                                         \
    do {                                                                               \
        const cudaError_t ember_cuda_err_ = (call);                                    \
        if (ember_cuda_err_ != cudaSuccess)                                            \
            ::ember::cuda::fail_cuda(ember_cuda_err_, #call, __FILE__, __LINE__);      \
    } while (0)

#define EMBER_CUBLAS_CHECK(call)                                                       \
    do {                                                                               \
        const cublasStatus_t ember_cublas_st_ = (call);                                \
        if (ember_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                 \
            ::ember::cuda::fail_cublas(ember_cublas_st_, #call, __FILE__, __LINE__);   \
    } while (0)
