#include "kernels/cuda/layernorm.cuh"

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.cuh"

namespace ember::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void layernorm_kernel(const float* x, int C, const float* w, const float* b, float eps, __half* out) {
    __shared__ float red[32];
    const float* xr = x + static_cast<size_t>(blockIdx.x) * C;
    __half* yr = out + static_cast<size_t>(blockIdx.x) * C;
    float s = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) s += xr[i];
    const float mean = block_sum(s, red) / static_cast<float>(C);
    float v = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        const float d = xr[i] - mean;
        v += d * d;
    }
    const float var = block_sum(v, red) / static_cast<float>(C);
    const float rstd = rsqrtf(var + eps);
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        const float y = (xr[i] - mean) * rstd * w[i] + (b ? b[i] : 0.0f);
        yr[i] = __float2half(y);
    }
}

}  // namespace

void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, __half* out, cudaStream_t stream) {
    if (T < 1 || C < 1) fail("layernorm: T = ", T, ", C = ", C, " must be at least 1");
    layernorm_kernel<<<T, kThreads, 0, stream>>>(x, C, weight, bias, eps, out);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
