// The batched matrix products of prefill, through cuBLASLt: y [T, N] f32 = x [T, K] fp16 @
// W [N, K]^T fp16, f32 compute (CUBLAS_COMPUTE_32F), torch.nn.functional.linear without
// the bias (linear_epilogue in linear.cuh adds bias, activation and residual).
// Row-major ember buffers are handed to column-major cuBLASLt as their transposes:
// y^T [N, T] = W [N, K] (stored as a K x N column-major matrix, op T) @ x^T [K, T].
#pragma once

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace ember::cuda {

class Gemm {
public:
    static constexpr size_t kAlign = 256;  // bytes, every pointer run() takes

    // workspace: device memory of workspace_bytes (planned by the caller; may be 0 bytes).
    // Throws ember::Error if cuBLASLt cannot be initialized.
    Gemm(void* workspace, size_t workspace_bytes);
    ~Gemm();
    Gemm(const Gemm&) = delete;
    Gemm& operator=(const Gemm&) = delete;

    // y [T, N] f32 = x [T, K] fp16 @ w [N, K]^T fp16. Device pointers, 256-byte aligned
    // (kAlign: the alignment cuBLASLt's heuristic assumes when none is given, and that the
    // algorithm it picks may need). Throws ember::Error (naming the call) on a misaligned
    // pointer, or if cuBLASLt refuses or finds no algorithm.
    void run(const __half* x, int T, const __half* w, int N, int K, float* y, cudaStream_t stream);

private:
    // The descriptors and chosen algorithm of one shape, kept so that a repeated prefill (the
    // `exact` policy recomputes a block_size window every token past it) neither asks the
    // heuristic again nor allocates descriptors again.
    struct Plan {
        int T = 0, N = 0, K = 0;
        cublasLtMatmulDesc_t op = nullptr;
        cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
        cublasLtMatmulAlgo_t algo = {};
    };
    static constexpr int kPlans = 16;  // a model has 4 (N, K) shapes per T
    static void destroy(Plan& p) noexcept;
    void make_plan(int T, int N, int K, Plan& p);

    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    size_t workspace_bytes_ = 0;
    Plan plans_[kPlans];
    int next_ = 0;  // the slot replaced next when all are taken
};

}  // namespace ember::cuda
