#include "kernels/cuda/gemm.h"

#include <cstdint>
#include <utility>

#include "kernels/cuda/check.h"

namespace ember::cuda {

Gemm::Gemm(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
    EMBER_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
    for (Plan& p : plans_) destroy(p);
    if (handle_) cublasLtDestroy(handle_);
}

void Gemm::destroy(Plan& p) noexcept {
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    p = Plan{};
}

void Gemm::make_plan(int T, int N, int K, Plan& p) {
    cublasLtMatmulPreference_t pref = nullptr;
    try {
        p.T = T;
        p.N = N;
        p.K = K;
        EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
        EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
        EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
        // A = W as stored: K x N column-major (ld K), used transposed -> N x K.
        EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16F, K, N, K));
        // B = x as stored: K x T column-major (ld K).
        EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16F, K, T, K));
        // C = D = y: N x T column-major (ld N) = y [T, N] row-major.
        EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, N, T, N));
        EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                                sizeof(workspace_bytes_)));
        cublasLtMatmulHeuristicResult_t result = {};
        int found = 0;
        EMBER_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found));
        if (found < 1) fail("gemm: cuBLASLt found no algorithm for T ", T, ", N ", N, ", K ", K, " (fp16 in, f32 out)");
        p.algo = result.algo;
        cublasLtMatmulPreferenceDestroy(pref);
    } catch (...) {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        destroy(p);
        throw;
    }
}

void Gemm::run(const __half* x, int T, const __half* w, int N, int K, float* y, cudaStream_t stream) {
    if (T < 1 || N < 1 || K < 1) fail("gemm: shape T ", T, ", N ", N, ", K ", K, " must be positive");
    for (const auto& [name, ptr] : {std::pair<const char*, const void*>{"x", x}, {"w", w}, {"y", y}}) {
        if (reinterpret_cast<uintptr_t>(ptr) % kAlign != 0) fail("gemm: ", name, " at ", ptr, " is not ", kAlign, "-byte aligned");
    }
    Plan* plan = nullptr;
    for (Plan& p : plans_) {
        if (p.op && p.T == T && p.N == N && p.K == K) plan = &p;
    }
    if (!plan) {
        plan = &plans_[next_];
        next_ = (next_ + 1) % kPlans;
        destroy(*plan);
        make_plan(T, N, K, *plan);
    }
    const float alpha = 1.0f, beta = 0.0f;
    EMBER_CUBLAS_CHECK(cublasLtMatmul(handle_, plan->op, &alpha, w, plan->a, x, plan->b, &beta, y, plan->c, y, plan->c, &plan->algo,
                                      workspace_, workspace_bytes_, stream));
}

}  // namespace ember::cuda
