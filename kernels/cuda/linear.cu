#include "kernels/cuda/linear.cuh"

#include <type_traits>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.cuh"

namespace ember::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

template <typename OutT>
__device__ __forceinline__ void store(OutT* y, size_t i, float v, bool accumulate) {
    if constexpr (std::is_same<OutT, float>::value) {
        y[i] = accumulate ? y[i] + v : v;
    } else {
        y[i] = __float2half(v);
    }
}

// This lane's share of W[n, :] . x (x fp16 [K], in global or shared memory); the caller
// sums over the warp. Vector loads where the dtype and K allow, else element by element.
__device__ __forceinline__ float row_dot(const __half* x, const kernels::WeightView& w, int n, int lane) {
    const int K = w.cols;
    float acc = 0.0f;
    if (w.type == kernels::WType::I8 && K % 4 == 0 && w.group_size % 4 == 0) {
        // Four int8 weights per load; a 4-aligned run of 4 lies in one group (group_size % 4 == 0).
        const int8_t* wr = static_cast<const int8_t*>(w.data) + static_cast<size_t>(n) * K;
        const float* sc = w.scales + static_cast<size_t>(n) * ((K + w.group_size - 1) / w.group_size);
        for (int k = lane * 4; k < K; k += 32 * 4) {
            const char4 q = *reinterpret_cast<const char4*>(wr + k);
            const float2 x01 = __half22float2(*reinterpret_cast<const __half2*>(x + k));
            const float2 x23 = __half22float2(*reinterpret_cast<const __half2*>(x + k + 2));
            const float d = static_cast<float>(q.x) * x01.x + static_cast<float>(q.y) * x01.y + static_cast<float>(q.z) * x23.x +
                            static_cast<float>(q.w) * x23.y;
            acc += d * sc[k / w.group_size];
        }
    } else if (w.type == kernels::WType::F16 && K % 2 == 0) {
        const __half2* wr = reinterpret_cast<const __half2*>(static_cast<const __half*>(w.data) + static_cast<size_t>(n) * K);
        const __half2* x2 = reinterpret_cast<const __half2*>(x);
        for (int k = lane; k < K / 2; k += 32) {
            const float2 a = __half22float2(wr[k]);
            const float2 b = __half22float2(x2[k]);
            acc += a.x * b.x + a.y * b.y;
        }
    } else {
        for (int k = lane; k < K; k += 32) acc += weight_at(w, n, k) * __half2float(x[k]);
    }
    return acc;
}

// One warp per output row n: lanes stride over K, then a warp sum.
template <typename OutT>
__global__ void gemv_kernel(const __half* x, kernels::WeightView w, const float* bias, Act act, bool accumulate, OutT* y) {
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (n >= w.rows) return;
    const float acc = warp_sum(row_dot(x, w, n, lane));
    if (lane == 0) store(y, n, activate(act, acc + (bias ? bias[n] : 0.0f)), accumulate);
}

// LayerNorm fused in front of the gemv: each block normalizes x [K] (f32, the residual
// stream) into fp16 in shared memory, as layernorm() would write it, then its warps take
// one output row each. Saves a launch and the round trip of xn.
__global__ void layernorm_gemv_kernel(const float* x, const float* ln_w, const float* ln_b, float eps, kernels::WeightView w,
                                      const float* bias, Act act, __half* y) {
    extern __shared__ __align__(16) unsigned char smem[];
    __half* xn = reinterpret_cast<__half*>(smem);
    __shared__ float red[32];
    const int K = w.cols;
    float s = 0.0f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) s += x[i];
    const float mean = block_sum(s, red) / static_cast<float>(K);
    float v = 0.0f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
        const float d = x[i] - mean;
        v += d * d;
    }
    const float rstd = rsqrtf(block_sum(v, red) / static_cast<float>(K) + eps);
    for (int i = threadIdx.x; i < K; i += blockDim.x) xn[i] = __float2half((x[i] - mean) * rstd * ln_w[i] + (ln_b ? ln_b[i] : 0.0f));
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (n >= w.rows) return;
    const float acc = warp_sum(row_dot(xn, w, n, lane));
    if (lane == 0) y[n] = __float2half(activate(act, acc + (bias ? bias[n] : 0.0f)));
}

__global__ void dequantize_kernel(kernels::WeightView w, __half* out) {
    const size_t total = static_cast<size_t>(w.rows) * w.cols;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        out[i] = __float2half(weight_at(w, static_cast<int>(i / w.cols), static_cast<int>(i % w.cols)));
    }
}

template <typename OutT>
__global__ void epilogue_kernel(const float* y, int T, int N, const float* bias, Act act, bool accumulate, OutT* out) {
    const size_t total = static_cast<size_t>(T) * N;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        const float v = y[i] + (bias ? bias[i % N] : 0.0f);
        store(out, i, activate(act, v), accumulate);
    }
}

void check_view(const kernels::WeightView& w, const char* what) {
    if (w.rows < 1 || w.cols < 1 || !w.data) fail(what, ": empty weight [", w.rows, ", ", w.cols, "]");
    if (w.type == kernels::WType::I8 && (w.group_size < 1 || w.group_size > w.cols || !w.scales))
        fail(what, ": int8 weight [", w.rows, ", ", w.cols, "] with group_size ", w.group_size, " or no scales");
}

int grid_for(size_t total) {
    const size_t blocks = (total + 255) / 256;
    return static_cast<int>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace

void linear_gemv(const __half* x, const kernels::WeightView& w, const float* bias, Act act, __half* y, cudaStream_t stream) {
    check_view(w, "linear_gemv");
    const int blocks = (w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemv_kernel<__half><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, bias, act, false, y);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void linear_gemv(const __half* x, const kernels::WeightView& w, const float* bias, Act act, bool accumulate, float* y,
                 cudaStream_t stream) {
    check_view(w, "linear_gemv");
    const int blocks = (w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemv_kernel<float><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, bias, act, accumulate, y);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void layernorm_linear_gemv(const float* x, const float* ln_w, const float* ln_b, float eps, const kernels::WeightView& w,
                           const float* bias, Act act, __half* y, cudaStream_t stream) {
    check_view(w, "layernorm_linear_gemv");
    const size_t smem = static_cast<size_t>(w.cols) * sizeof(__half);
    if (smem > kMaxLayerNormGemvCols * sizeof(__half)) fail("layernorm_linear_gemv: ", w.cols, " columns, at most ", kMaxLayerNormGemvCols);
    const int blocks = (w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    layernorm_gemv_kernel<<<blocks, kWarpsPerBlock * 32, smem, stream>>>(x, ln_w, ln_b, eps, w, bias, act, y);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void dequantize_f16(const kernels::WeightView& w, __half* out, cudaStream_t stream) {
    check_view(w, "dequantize_f16");
    const size_t total = static_cast<size_t>(w.rows) * w.cols;
    if (w.type == kernels::WType::F16) {
        EMBER_CUDA_CHECK(cudaMemcpyAsync(out, w.data, total * sizeof(__half), cudaMemcpyDeviceToDevice, stream));
        return;
    }
    dequantize_kernel<<<grid_for(total), 256, 0, stream>>>(w, out);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void linear_epilogue(const float* y, int T, int N, const float* bias, Act act, __half* out, cudaStream_t stream) {
    if (T < 1 || N < 1) fail("linear_epilogue: [", T, ", ", N, "] is empty");
    epilogue_kernel<__half><<<grid_for(static_cast<size_t>(T) * N), 256, 0, stream>>>(y, T, N, bias, act, false, out);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void linear_epilogue(const float* y, int T, int N, const float* bias, Act act, bool accumulate, float* out, cudaStream_t stream) {
    if (T < 1 || N < 1) fail("linear_epilogue: [", T, ", ", N, "] is empty");
    epilogue_kernel<float><<<grid_for(static_cast<size_t>(T) * N), 256, 0, stream>>>(y, T, N, bias, act, accumulate, out);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
