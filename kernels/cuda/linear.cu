#include "kernels/cuda/linear.cuh"

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.cuh"

namespace ember::cuda {

namespace {

// Warps (output rows) per block of the decode gemvs. On the H200, 8 decoded 3% (lecture full
// config) to 6% (GPT-2 124M) faster than 4, 16 the same as 8, 2 and 32 slower (the
// LayerNorm-fused kernel normalizes x once per block): tests/device/results/2026-12-04/.
constexpr int kWarpsPerBlock = 8;

template <typename OutT>
__device__ __forceinline__ void store(OutT* y, size_t i, float v, bool accumulate) {
    if constexpr (std::is_same<OutT, float>::value) {
        y[i] = accumulate ? y[i] + v : v;
    } else {
        y[i] = __float2half(v);
    }
}

// Eight fp16 of x (16 bytes, 16-byte aligned) as f32.
__device__ __forceinline__ void load8(const __half* x, float* f) {
    const uint4 u = *reinterpret_cast<const uint4*>(x);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 p = __half22float2(h[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}

// 16 int8 weights (one 16-byte load) . x[0..16).
__device__ __forceinline__ float dot16_i8(const int4& q, const __half* x) {
    float xf[16];
    load8(x, xf);
    load8(x + 8, xf + 8);
    const int words[4] = {q.x, q.y, q.z, q.w};
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int b = 0; b < 4; ++b) d += static_cast<float>(static_cast<int8_t>(words[i] >> (8 * b))) * xf[4 * i + b];
    }
    return d;
}

// 8 fp16 weights (one 16-byte load) . x[0..8).
__device__ __forceinline__ float dot8_f16(const uint4& u, const __half* x) {
    float xf[8];
    load8(x, xf);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 p = __half22float2(h[i]);
        d += p.x * xf[2 * i] + p.y * xf[2 * i + 1];
    }
    return d;
}

// Loads in flight per lane in the 16-byte paths: a decode gemv has few warps per SM, so a
// warp that waits for one load at a time is bound by memory latency, not bandwidth.
constexpr int kLoadsInFlight = 4;

// This lane's share of W[n, :] . x (x fp16 [K], in global or shared memory); the caller
// sums over the warp. vec16 (checked on the host, see vec16_ok): W's rows and x are 16-byte
// aligned and a 16-byte run of W lies in one int8 group, so each lane loads 16 bytes of W at
// a time, kLoadsInFlight of them before it uses any. Else 4 int8 or 2 fp16 per load where
// K allows, element by element otherwise.
__device__ __forceinline__ float row_dot(const __half* x, const kernels::WeightView& w, int n, int lane, bool vec16) {
    const int K = w.cols;
    float acc = 0.0f;
    if (vec16 && w.type == kernels::WType::I8) {
        const int4* wr = reinterpret_cast<const int4*>(static_cast<const int8_t*>(w.data) + static_cast<size_t>(n) * K);
        const float* sc = w.scales + static_cast<size_t>(n) * ((K + w.group_size - 1) / w.group_size);
        const int runs = K / 16;
        for (int j0 = lane; j0 < runs; j0 += 32 * kLoadsInFlight) {
            int4 q[kLoadsInFlight];
            float s[kLoadsInFlight];
#pragma unroll
            for (int u = 0; u < kLoadsInFlight; ++u) {
                const int j = j0 + 32 * u;
                if (j < runs) {
                    q[u] = __ldg(wr + j);
                    s[u] = __ldg(sc + j * 16 / w.group_size);
                }
            }
#pragma unroll
            for (int u = 0; u < kLoadsInFlight; ++u) {
                const int j = j0 + 32 * u;
                if (j < runs) acc += dot16_i8(q[u], x + j * 16) * s[u];
            }
        }
    } else if (vec16 && w.type == kernels::WType::F16) {
        const uint4* wr = reinterpret_cast<const uint4*>(static_cast<const __half*>(w.data) + static_cast<size_t>(n) * K);
        const int runs = K / 8;
        for (int j0 = lane; j0 < runs; j0 += 32 * kLoadsInFlight) {
            uint4 q[kLoadsInFlight];
#pragma unroll
            for (int u = 0; u < kLoadsInFlight; ++u) {
                const int j = j0 + 32 * u;
                if (j < runs) q[u] = __ldg(wr + j);
            }
#pragma unroll
            for (int u = 0; u < kLoadsInFlight; ++u) {
                const int j = j0 + 32 * u;
                if (j < runs) acc += dot8_f16(q[u], x + j * 8);
            }
        }
    } else if (w.type == kernels::WType::I8 && K % 4 == 0 && w.group_size % 4 == 0) {
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
__global__ void gemv_kernel(const __half* x, kernels::WeightView w, const float* bias, Act act, bool accumulate, bool vec16, OutT* y) {
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (n >= w.rows) return;
    const float acc = warp_sum(row_dot(x, w, n, lane, vec16));
    if (lane == 0) store(y, n, activate(act, acc + (bias ? bias[n] : 0.0f)), accumulate);
}

// LayerNorm fused in front of the gemv: each block normalizes x [K] (f32, the residual
// stream) into fp16 in shared memory, as layernorm() would write it, then its warps take
// one output row each. Saves a launch and the round trip of xn.
__global__ void layernorm_gemv_kernel(const float* x, const float* ln_w, const float* ln_b, float eps, kernels::WeightView w,
                                      const float* bias, Act act, bool vec16, __half* y) {
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
    const float acc = warp_sum(row_dot(xn, w, n, lane, vec16));
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

// row_dot's 2- and 4-wide paths read x as __half2: it must be 4-byte aligned.
void check_x(const void* x, const char* what) {
    if (reinterpret_cast<uintptr_t>(x) % 4 != 0) fail(what, ": x at ", x, " is not 4-byte aligned");
}

void check_view(const kernels::WeightView& w, const char* what) {
    if (w.rows < 1 || w.cols < 1 || !w.data) fail(what, ": empty weight [", w.rows, ", ", w.cols, "]");
    // The narrow paths read W as char4 (int8), __half2 (f16) or float: 4 bytes at a time.
    if (reinterpret_cast<uintptr_t>(w.data) % 4 != 0) fail(what, ": weight at ", w.data, " is not 4-byte aligned");
    if (w.type == kernels::WType::I8 && (w.group_size < 1 || w.group_size > w.cols || !w.scales))
        fail(what, ": int8 weight [", w.rows, ", ", w.cols, "] with group_size ", w.group_size, " or no scales");
}

// Whether row_dot's 16-byte paths may read W (int8 or f16) and x: W's base and every row
// start 16-byte aligned (K a multiple of 16 elements for int8, 8 for f16), an int8 group a
// multiple of 16 wide, and x 16-byte aligned (x_aligned: shared memory is).
bool vec16_ok(const kernels::WeightView& w, const void* x, bool x_aligned = false) {
    const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (!aligned(w.data) || !(x_aligned || aligned(x))) return false;
    if (w.type == kernels::WType::I8) return w.cols % 16 == 0 && w.group_size % 16 == 0;
    if (w.type == kernels::WType::F16) return w.cols % 8 == 0;
    return false;
}

int grid_for(size_t total) {
    const size_t blocks = (total + 255) / 256;
    return static_cast<int>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace

void linear_gemv(const __half* x, const kernels::WeightView& w, const float* bias, Act act, __half* y, cudaStream_t stream) {
    check_view(w, "linear_gemv");
    check_x(x, "linear_gemv");
    const int blocks = (w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemv_kernel<__half><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, bias, act, false, vec16_ok(w, x), y);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void linear_gemv(const __half* x, const kernels::WeightView& w, const float* bias, Act act, bool accumulate, float* y,
                 cudaStream_t stream) {
    check_view(w, "linear_gemv");
    check_x(x, "linear_gemv");
    const int blocks = (w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemv_kernel<float><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, bias, act, accumulate, vec16_ok(w, x), y);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void layernorm_linear_gemv(const float* x, const float* ln_w, const float* ln_b, float eps, const kernels::WeightView& w,
                           const float* bias, Act act, __half* y, cudaStream_t stream) {
    check_view(w, "layernorm_linear_gemv");
    const size_t smem = static_cast<size_t>(w.cols) * sizeof(__half);
    if (smem > kMaxLayerNormGemvCols * sizeof(__half)) fail("layernorm_linear_gemv: ", w.cols, " columns, at most ", kMaxLayerNormGemvCols);
    const int blocks = (w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    layernorm_gemv_kernel<<<blocks, kWarpsPerBlock * 32, smem, stream>>>(x, ln_w, ln_b, eps, w, bias, act, vec16_ok(w, nullptr, true), y);
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
