// The int8 row kernel shared by linear()'s SIMD variants (linear_avx2.cpp, linear_avxvnni.cpp,
// linear_neon.cpp, linear_dotprod.cpp): R rows of W against every row of x, group by group,
// x loaded once per chunk for R rows:
//   y[t, n + r] = sum_g (xq_t . wq_{n+r})_g * xs[t, g] * ws[n + r, g] + bias[n + r].
// Only those files include it, each compiled with its own target flags; everything here has
// internal linkage (an anonymous namespace), so no copy built with one variant's flags can be
// linked into another's code or into the plain code that runs before the CPU check.
//
// The ISA comes in as a policy D with:
//   Vec, Sum, Acc                         int8 chunk, int32 lanes, f32 lanes
//   XVec                                  a chunk of x as dot() takes it, made once for the
//                                         R rows (Vec, or AVX2's x with |x|)
//   kChunk                                bytes of x per step
//   struct Group { ... }                  per-group state (VNNI: 128 * sum(x))
//   Vec load(const int8_t*)               one chunk of W
//   XVec load_x(const int8_t*)            one chunk of x
//   void begin(Group&), step(Group&, const XVec& x)
//   Sum zero(), Sum dot(Sum, const XVec& x, Vec w)
//   Acc acc_zero(), Acc fma(Acc, Sum, const Group&, float scale)   acc + scale * (products)
// and the row store above for its Acc (store_rows<R>(acc, tail, bias, y)).
// Also here, for those files: the 256-bit x86 helpers (__AVX2__) and the NEON row store.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {
namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

#if defined(__AVX2__)
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// y[0..R) = horizontal sums of acc[0..R) + tail + bias (bias may be null).
template <int R>
void store_rows(const __m256* acc, const float* tail, const float* bias, float* y) {
    if constexpr (R == 4) {
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
        __m128 v = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        v = _mm_add_ps(v, _mm_loadu_ps(tail));
        if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias));
        _mm_storeu_ps(y, v);
    } else {
        for (int r = 0; r < R; ++r) y[r] = hsum(acc[r]) + tail[r] + (bias ? bias[r] : 0.0f);
    }
}
#endif

#if defined(__ARM_NEON)
// The NEON policy for i8_block below, with the 16-products-into-4-lanes step as a parameter
// (widening multiplies in linear_neon.cpp, SDOT in linear_dotprod.cpp).
template <int32x4_t (*Dot16)(int32x4_t, int8x16_t, int8x16_t)>
struct NeonI8 {
    using Vec = int8x16_t;
    using Sum = int32x4_t;
    using Acc = float32x4_t;
    using XVec = Vec;
    static constexpr int kChunk = 16;
    struct Group {};
    static Vec load(const int8_t* p) { return vld1q_s8(p); }
    static XVec load_x(const int8_t* p) { return vld1q_s8(p); }
    static void begin(Group&) {}
    static void step(Group&, Vec) {}
    static Sum zero() { return vdupq_n_s32(0); }
    static Sum dot(Sum s, Vec x, Vec w) { return Dot16(s, x, w); }
    static Acc acc_zero() { return vdupq_n_f32(0.0f); }
    static Acc fma(Acc acc, Sum s, const Group&, float scale) { return vfmaq_n_f32(acc, vcvtq_f32_s32(s), scale); }
};

// y[0..R) = horizontal sums of acc[0..R) + tail + bias (bias may be null).
template <int R>
void store_rows(const float32x4_t* acc, const float* tail, const float* bias, float* y) {
    if constexpr (R == 4) {
        float32x4_t v = vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3]));
        v = vaddq_f32(v, vld1q_f32(tail));
        if (bias) v = vaddq_f32(v, vld1q_f32(bias));
        vst1q_f32(y, v);
    } else {
        for (int r = 0; r < R; ++r) y[r] = vaddvq_f32(acc[r]) + tail[r] + (bias ? bias[r] : 0.0f);
    }
}
#endif

// The part of a group past its last whole chunk (short groups, K or the group size not a
// multiple of the chunk), R rows of W (stride K): tail[r] += x_scale * w_scale[r * gpr] * x . w_r.
template <int R>
void add_tail(const int8_t* x, const int8_t* w, int K, int k, int end, float x_scale, const float* w_scale, int gpr,
              float* tail) {
    for (int r = 0; r < R; ++r) {
        int s = 0;
        for (int i = k; i < end; ++i) s += x[i] * w[static_cast<size_t>(r) * K + i];
        tail[r] += static_cast<float>(s) * x_scale * w_scale[static_cast<size_t>(r) * gpr];
    }
}

template <typename D, int R, bool kPrefetch>
void i8_block(const Args& a, int n) {
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    // Decode streams W once per token. x86: kStreamAhead bytes ahead into L2 (linear_variants.h);
    // ARM: the next block of R rows (R * K bytes ahead) into L1, once per row and 64 bytes.
#if defined(__x86_64__)
    constexpr int kLocality = 2;  // prefetcht1
    const size_t ahead = kStreamAhead;
#else
    constexpr int kLocality = 3;
    const size_t ahead = static_cast<size_t>(R) * K;
#endif
    for (int t = 0; t < a.T; ++t) {
        const int8_t* x = a.xq + static_cast<size_t>(t) * K;
        const float* xs = a.xs + static_cast<size_t>(t) * gpr;
        typename D::Acc acc[R];
        float tail[R];
        for (int r = 0; r < R; ++r) acc[r] = D::acc_zero(), tail[r] = 0.0f;
        for (int g = 0; g < gpr; ++g) {
            const int end = min_int(K, (g + 1) * group);
            typename D::Sum s[R];
            for (int r = 0; r < R; ++r) s[r] = D::zero();
            typename D::Group st;
            D::begin(st);
            int k = g * group;
#if defined(__ARM_NEON)
            // 64 bytes (a cache line) of each row a step: one prefetch per row and line, not one
            // per 16-byte chunk, and a second sum per row (s2) for two independent chains of
            // dot products; the integer sums are the same. What is left of the group (less than
            // 64 bytes: groups of 32, a short last group) takes the chunk loop below.
            if (k + 64 <= end) {
                typename D::Sum s2[R];
                for (int r = 0; r < R; ++r) s2[r] = D::zero();
                for (; k + 64 <= end; k += 64) {
                    const typename D::XVec x0 = D::load_x(x + k), x1 = D::load_x(x + k + 16);
                    const typename D::XVec x2 = D::load_x(x + k + 32), x3 = D::load_x(x + k + 48);
                    for (int r = 0; r < R; ++r) {
                        const int8_t* wr = w + static_cast<size_t>(r) * K + k;
                        if (kPrefetch) __builtin_prefetch(wr + ahead, 0, kLocality);
                        s[r] = D::dot(s[r], x0, D::load(wr));
                        s2[r] = D::dot(s2[r], x1, D::load(wr + 16));
                        s[r] = D::dot(s[r], x2, D::load(wr + 32));
                        s2[r] = D::dot(s2[r], x3, D::load(wr + 48));
                    }
                }
                for (int r = 0; r < R; ++r) s[r] = vaddq_s32(s[r], s2[r]);
            }
#endif
            for (; k + D::kChunk <= end; k += D::kChunk) {
                const typename D::XVec vx = D::load_x(x + k);
                D::step(st, vx);
                for (int r = 0; r < R; ++r) {
                    const int8_t* wr = w + static_cast<size_t>(r) * K + k;
                    if (kPrefetch) __builtin_prefetch(wr + ahead, 0, kLocality);  // a hint: never faults, past W's end included
                    s[r] = D::dot(s[r], vx, D::load(wr));
                }
            }
            for (int r = 0; r < R; ++r) acc[r] = D::fma(acc[r], s[r], st, xs[g] * ws[static_cast<size_t>(r) * gpr + g]);
            if (k < end) add_tail<R>(x, w, K, k, end, xs[g], ws + g, gpr, tail);
        }
        store_rows<R>(acc, tail, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t) * a.N + n);
    }
}

// Rows [n_begin, n_end) of y, four at a time.
template <typename D, bool kPrefetch>
void i8_rows_block(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<D, 4, kPrefetch>(a, n);
    for (; n < n_end; ++n) i8_block<D, 1, kPrefetch>(a, n);
}

// Decode (T == 1) reads each row of W once: prefetched. Prefill re-reads a block for every
// row of x from L1, where a prefetch per chunk is only extra work.
template <typename D>
void i8_rows(const Args& a, int n_begin, int n_end) {
    if (a.T == 1) {
        i8_rows_block<D, true>(a, n_begin, n_end);
    } else {
        i8_rows_block<D, false>(a, n_begin, n_end);
    }
}

}  // namespace
}  // namespace ember::kernels::linear_detail
