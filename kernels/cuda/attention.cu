#include "kernels/cuda/attention.cuh"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.cuh"

namespace ember::cuda {

namespace {

constexpr int kMaxWarps = 16;
constexpr int kPerLane = kMaxHeadSize / 32;  // head dimensions a lane owns: d = lane + 32 * i

// Scores in chunks of 32 keys, one key per lane: each lane takes its key's whole dot product
// with q (q in shared memory, read by every lane at once), so a warp has 32 keys' loads in
// flight where a key at a time across the lanes waited for each in turn. Then one online-
// softmax update per chunk, and the weighted sum of the chunk's v rows:
//   Vec16 (head_size a multiple of 8): lane = 8 g + r; the four groups g take every fourth
//     key of the chunk, lane r loads dimensions [8 r, 8 r + 8) (+ 64 i) as one 16-byte run,
//     so a chunk is 8 steps of 4 keys; the groups' sums are added at the end.
//   else: lanes own dimensions d = lane + 32 i, a key at a time.
//
// store_row (decode only, T == 1): first copy this head's slice of the new token's K and V
// (the k and v parts of its qkv row, right after q) into cache row *store_row, so that no
// separate kv_store launch is needed; __syncthreads makes the writes visible to the block,
// and no other block reads this head's columns.
template <bool Vec16>
__global__ void attention_kernel(const __half* q, __half* k, __half* v, AttentionShape s, const int* n_keys0,
                                 const int* store_row, __half* out) {
    constexpr int kAcc = Vec16 ? kMaxHeadSize / 64 * 8 : kPerLane;  // accumulators a lane keeps
    __shared__ float s_q[kMaxHeadSize];
    __shared__ float s_m[kMaxWarps], s_l[kMaxWarps];
    __shared__ float s_acc[kMaxWarps][kMaxHeadSize];
    const int t = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    const int hs = s.head_size, C = s.n_head * hs;
    const size_t head = static_cast<size_t>(h) * hs;
    int n_keys = *n_keys0 + t;
    n_keys = n_keys < 0 ? 0 : n_keys > s.S ? s.S : n_keys;
    if (store_row) {
        const int row = *store_row;
        if (row >= 0 && row < s.S) {
            const __half* src = q + head;  // T == 1: row 0 of q | k | v
            for (int d = threadIdx.x; d < hs; d += blockDim.x) {
                k[static_cast<size_t>(row) * C + head + d] = src[C + d];
                v[static_cast<size_t>(row) * C + head + d] = src[2 * C + d];
            }
        }
    }
    const __half* qh = q + static_cast<size_t>(t) * s.ldq + head;
    for (int d = threadIdx.x; d < hs; d += blockDim.x) s_q[d] = __half2float(qh[d]);
    __syncthreads();  // s_q, and the stored K/V row

    const int g = lane >> 3, r = lane & 7;  // Vec16: key group, 16-byte run of dimensions
    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int base = warp * 32; base < n_keys; base += n_warps * 32) {
        const int j = base + lane;
        float score = -INFINITY;
        if (j < n_keys) {
            const __half* kj = k + static_cast<size_t>(j) * C + head;
            float dot = 0.0f;
            if (Vec16) {
#pragma unroll 4
                for (int d = 0; d < hs; d += 8) {
                    const uint4 u = *reinterpret_cast<const uint4*>(kj + d);
                    const __half2* k2 = reinterpret_cast<const __half2*>(&u);
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const float2 f = __half22float2(k2[i]);
                        dot += f.x * s_q[d + 2 * i] + f.y * s_q[d + 2 * i + 1];
                    }
                }
            } else {
                for (int d = 0; d < hs; ++d) dot += __half2float(kj[d]) * s_q[d];
            }
            score = dot * s.scale;
        }
        // Lane 0's key (base) is always visible, so the chunk's max is finite.
        const float m_new = fmaxf(m, warp_max(score));
        const float corr = expf(m - m_new);  // 0 for the first chunk (m = -inf)
        const float p = j < n_keys ? expf(score - m_new) : 0.0f;
        l = l * corr + warp_sum(p);
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] *= corr;
        const int chunk = min(32, n_keys - base);  // the same in every lane
        if (Vec16) {
#pragma unroll 2
            for (int c0 = 0; c0 < chunk; c0 += 4) {
                const int c = c0 + g;
                const float pc = __shfl_sync(0xffffffffu, p, c);  // c < 32; p is 0 past the chunk
                if (c < chunk) {
                    const __half* vc = v + static_cast<size_t>(base + c) * C + head;
#pragma unroll
                    for (int i = 0; i < kMaxHeadSize / 64; ++i) {
                        const int d0 = 64 * i + 8 * r;
                        if (d0 < hs) {
                            const uint4 u = *reinterpret_cast<const uint4*>(vc + d0);
                            const __half2* v2 = reinterpret_cast<const __half2*>(&u);
#pragma unroll
                            for (int e = 0; e < 4; ++e) {
                                const float2 f = __half22float2(v2[e]);
                                acc[8 * i + 2 * e] += pc * f.x;
                                acc[8 * i + 2 * e + 1] += pc * f.y;
                            }
                        }
                    }
                }
            }
        } else {
#pragma unroll 8
            for (int c = 0; c < chunk; ++c) {
                const float pc = __shfl_sync(0xffffffffu, p, c);
                const __half* vc = v + static_cast<size_t>(base + c) * C + head;
#pragma unroll
                for (int i = 0; i < kPerLane; ++i) {
                    const int d = lane + 32 * i;
                    if (d < hs) acc[i] += pc * __half2float(vc[d]);
                }
            }
        }
        m = m_new;
    }
    // Merge the warps: out = sum_w acc_w e^(m_w - M) / sum_w l_w e^(m_w - M), M = max m_w.
    if (lane == 0) {
        s_m[warp] = m;
        s_l[warp] = l;
    }
    if (Vec16) {
#pragma unroll
        for (int i = 0; i < kAcc; ++i) {  // add the four key groups' sums
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 8);
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 16);
        }
        if (g == 0) {
#pragma unroll
            for (int i = 0; i < kAcc; ++i) {
                const int d = 64 * (i / 8) + 8 * r + i % 8;
                if (d < hs) s_acc[warp][d] = acc[i];
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int d = lane + 32 * i;
            if (d < hs) s_acc[warp][d] = acc[i];
        }
    }
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < n_warps; ++w)
        if (s_l[w] > 0.0f) M = fmaxf(M, s_m[w]);
    float L = 0.0f;
    for (int w = 0; w < n_warps; ++w)
        if (s_l[w] > 0.0f) L += s_l[w] * expf(s_m[w] - M);
    __half* oh = out + static_cast<size_t>(t) * C + head;
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
    const dim3 grid(s.T, s.n_head);
    const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (s.head_size % 8 == 0 && aligned(k) && aligned(v)) {  // a head's slice of a cache row is whole 16-byte runs
        attention_kernel<true><<<grid, warps * 32, 0, stream>>>(q, k, v, s, n_keys0, store_row, out);
    } else {
        attention_kernel<false><<<grid, warps * 32, 0, stream>>>(q, k, v, s, n_keys0, store_row, out);
    }
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
