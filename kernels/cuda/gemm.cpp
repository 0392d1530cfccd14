#include "kernels/cuda/gemm.h"

#include "kernels/cuda/check.h"

namespace ember::cuda {

namespace {

// Owns the descriptors of one cublasLtMatmul call; destroys them on every path.
struct Descriptors {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~Descriptors() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

}  // namespace

Gemm::Gemm(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
    EMBER_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
    if (handle_) cublasLtDestroy(handle_);
}

void Gemm::run(const __half* x, int T, const __half* w, int N, int K, float* y, cudaStream_t stream) {
    if (T < 1 || N < 1 || K < 1) fail("gemm: shape T ", T, ", N ", N, ", K ", K, " must be positive");
    Descriptors d;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
    // A = W as stored: K x N column-major (ld K), used transposed -> N x K.
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16F, K, N, K));
    // B = x as stored: K x T column-major (ld K).
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16F, K, T, K));
    // C = D = y: N x T column-major (ld N) = y [T, N] row-major.
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32F, N, T, N));
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                            sizeof(workspace_bytes_)));
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    EMBER_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &result, &found));
    if (found < 1) fail("gemm: cuBLASLt found no algorithm for T ", T, ", N ", N, ", K ", K, " (fp16 in, f32 out)");
    const float alpha = 1.0f, beta = 0.0f;
    EMBER_CUBLAS_CHECK(cublasLtMatmul(handle_, d.op, &alpha, w, d.a, x, d.b, &beta, y, d.c, y, d.c, &result.algo, workspace_,
                                      workspace_bytes_, stream));
}

}  // namespace ember::cuda
