#include "kernels/cuda/attention.cuh"

#include <cmath>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.cuh"

namespace ember::cuda {

namespace {

constexpr int kMaxWarps = 16;
constexpr int kPerLane = kMaxHeadSize / 32;  // head dimensions a lane owns: d = lane + 32 * i

// store_row (decode only, T == 1): first copy this head's slice of the new token's K and V
// (the k and v parts of its qkv row, right after q) into cache row *store_row, so that no
// separate kv_store launch is needed; __syncthreads makes the writes visible to the block,
// and no other block reads this head's columns.
__global__ void attention_kernel(const __half* q, __half* k, __half* v, AttentionShape s, const int* n_keys0,
                                 const int* store_row, __half* out) {
    __shared__ float s_m[kMaxWarps], s_l[kMaxWarps];
    __shared__ float s_acc[kMaxWarps][kMaxHeadSize];
    const int t = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    const int hs = s.head_size, C = s.n_head * hs;
    int n_keys = *n_keys0 + t;
    n_keys = n_keys < 0 ? 0 : n_keys > s.S ? s.S : n_keys;
    if (store_row) {
        const int row = *store_row;
        if (row >= 0 && row < s.S) {
            const __half* src = q + static_cast<size_t>(h) * hs;  // T == 1: row 0 of q | k | v
            for (int d = threadIdx.x; d < hs; d += blockDim.x) {
                k[static_cast<size_t>(row) * C + static_cast<size_t>(h) * hs + d] = src[C + d];
                v[static_cast<size_t>(row) * C + static_cast<size_t>(h) * hs + d] = src[2 * C + d];
            }
        }
        __syncthreads();
    }

    const __half* qh = q + static_cast<size_t>(t) * s.ldq + static_cast<size_t>(h) * hs;
    float qr[kPerLane], acc[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        qr[i] = d < hs ? __half2float(qh[d]) : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int j = warp; j < n_keys; j += n_warps) {
        const __half* kj = k + static_cast<size_t>(j) * C + static_cast<size_t>(h) * hs;
        const __half* vj = v + static_cast<size_t>(j) * C + static_cast<size_t>(h) * hs;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int d = lane + 32 * i;
            if (d < hs) dot += qr[i] * __half2float(kj[d]);
        }
        const float score = warp_sum(dot) * s.scale;
        const float m_new = fmaxf(m, score);
        const float corr = expf(m - m_new);  // 0 for the first key (m = -inf)
        const float p = expf(score - m_new);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int d = lane + 32 * i;
            acc[i] = acc[i] * corr + (d < hs ? p * __half2float(vj[d]) : 0.0f);
        }
        m = m_new;
    }
    // Merge the warps: out = sum_w acc_w e^(m_w - M) / sum_w l_w e^(m_w - M), M = max m_w.
    if (lane == 0) {
        s_m[warp] = m;
        s_l[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < hs) s_acc[warp][d] = acc[i];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < n_warps; ++w)
        if (s_l[w] > 0.0f) M = fmaxf(M, s_m[w]);
    float L = 0.0f;
    for (int w = 0; w < n_warps; ++w)
        if (s_l[w] > 0.0f) L += s_l[w] * expf(s_m[w] - M);
    __half* oh = out + static_cast<size_t>(t) * C + static_cast<size_t>(h) * hs;
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < n_warps; ++w)
            if (s_l[w] > 0.0f) o += s_acc[w][d] * expf(s_m[w] - M);
        oh[d] = __float2half(L > 0.0f ? o / L : 0.0f);
    }
}

__global__ void kv_store_kernel(const __half* qkv, int C, int S, const int* row0, __half* k, __half* v) {
    const int t = blockIdx.x;
    const int row = *row0 + t;
    if (row < 0 || row >= S) return;
    const __half* src = qkv + static_cast<size_t>(t) * 3 * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        k[static_cast<size_t>(row) * C + i] = src[C + i];
        v[static_cast<size_t>(row) * C + i] = src[2 * C + i];
    }
}

void check_shape(const AttentionShape& s) {
    if (s.T < 1 || s.n_head < 1 || s.head_size < 1 || s.head_size > kMaxHeadSize || s.S < 1 || s.ldq < s.n_head * s.head_size)
        fail("attention: shape T ", s.T, ", n_head ", s.n_head, ", head_size ", s.head_size, " (at most ", kMaxHeadSize, "), S ",
             s.S, ", ldq ", s.ldq, " is not supported");
}

void launch(const __half* q, __half* k, __half* v, const AttentionShape& s, const int* n_keys0, const int* store_row,
            __half* out, int warps, cudaStream_t stream) {
    check_shape(s);
    attention_kernel<<<dim3(s.T, s.n_head), warps * 32, 0, stream>>>(q, k, v, s, n_keys0, store_row, out);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void attention_prefill(const __half* q, const __half* k, const __half* v, const AttentionShape& s, const int* n_keys0,
                       __half* out, cudaStream_t stream) {
    // Without store_row the kernel only reads k and v.
    launch(q, const_cast<__half*>(k), const_cast<__half*>(v), s, n_keys0, nullptr, out, 4, stream);
}

void attention_decode(const __half* q, __half* k, __half* v, const AttentionShape& s, const int* n_keys0, const int* store_row,
                      __half* out, cudaStream_t stream) {
    if (s.T != 1) fail("attention_decode: T = ", s.T, ", must be 1");
    if (s.ldq < 3 * s.n_head * s.head_size && store_row) fail("attention_decode: storing K/V needs q inside a q | k | v row (ldq >= 3C)");
    launch(q, k, v, s, n_keys0, store_row, out, kMaxWarps, stream);
}

void kv_store(const __half* qkv, int T, int C, int S, const int* row0, __half* k, __half* v, cudaStream_t stream) {
    if (T < 1 || C < 1 || S < 1) fail("kv_store: T ", T, ", C ", C, ", S ", S, " must be at least 1");
    kv_store_kernel<<<T, 128, 0, stream>>>(qkv, C, S, row0, k, v);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
