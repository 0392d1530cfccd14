// linear()'s NEON kernels (Advanced SIMD, part of every aarch64 CPU: no extra flags).
#include <arm_neon.h>

#include "kernels/cpu/half.h"
#include "kernels/cpu/linear_gemm_int8.h"
#include "kernels/cpu/linear_int8_block.h"

namespace ember::kernels::linear_detail {

namespace {

float dot_f32(const float* a, const float* b, int n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 16 <= n; k += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + k), vld1q_f32(b + k));
        s1 = vfmaq_f32(s1, vld1q_f32(a + k + 4), vld1q_f32(b + k + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + k + 8), vld1q_f32(b + k + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + k + 12), vld1q_f32(b + k + 12));
    }
    for (; k + 4 <= n; k += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + k), vld1q_f32(b + k));
    float acc = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; k < n; ++k) acc += a[k] * b[k];
    return acc;
}

inline float32x4_t load_f16x4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

float dot_f16(const float* a, const uint16_t* b, int n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 16 <= n; k += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + k), load_f16x4(b + k));
        s1 = vfmaq_f32(s1, vld1q_f32(a + k + 4), load_f16x4(b + k + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + k + 8), load_f16x4(b + k + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + k + 12), load_f16x4(b + k + 12));
    }
    for (; k + 4 <= n; k += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + k), load_f16x4(b + k));
    float acc = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; k < n; ++k) acc += a[k] * half_to_float(b[k]);
    return acc;
}

// 16 int8 products into 4 int32 lanes: widening multiplies to int16 (a pair of products stays
// within int16: |x| <= 127, |w| <= 128), then pairwise add-accumulate into int32.
inline int32x4_t dot16(int32x4_t acc, int8x16_t x, int8x16_t w) {
    int16x8_t p = vmull_s8(vget_low_s8(x), vget_low_s8(w));
    p = vmlal_s8(p, vget_high_s8(x), vget_high_s8(w));
    return vpadalq_s16(acc, p);
}

// 4 lanes of 4 products each (x and w: 4 bytes per lane), for linear_gemm_int8.h: widening
// multiplies to int16, pairwise adds to int32, then a pairwise add of the two halves.
inline int32x4_t dot4_lanes(int32x4_t acc, int8x16_t x, int8x16_t w) {
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(x), vget_low_s8(w)));
    const int32x4_t hi = vpaddlq_s16(vmull_high_s8(x, w));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));
}

// The f32 GEMM's tile: RR rows of W (from n) x CC rows of x (from t), lanes over k, RR * CC
// accumulators (4 x 4: 16 of the 32 registers); f16 weights widened as they are loaded
// (fcvtl); the part of K past the last 4 scalar.
inline float32x4_t load_w4(const float* p) { return vld1q_f32(p); }
inline float32x4_t load_w4(const uint16_t* p) { return load_f16x4(p); }
inline float w_at(const float* p) { return *p; }
inline float w_at(const uint16_t* p) { return half_to_float(*p); }

template <typename W, int RR, int CC>
void f_tile(const Args& a, int n, int t) {
    const int K = a.K;
    const W* w = static_cast<const W*>(a.w) + static_cast<size_t>(n) * K;
    const float* x = a.x + static_cast<size_t>(t) * K;
    float32x4_t acc[CC][RR];
    for (int c = 0; c < CC; ++c)
        for (int r = 0; r < RR; ++r) acc[c][r] = vdupq_n_f32(0.0f);
    int k = 0;
    for (; k + 4 <= K; k += 4) {
        float32x4_t wv[RR];
        for (int r = 0; r < RR; ++r) wv[r] = load_w4(w + static_cast<size_t>(r) * K + k);
        for (int c = 0; c < CC; ++c) {
            const float32x4_t xv = vld1q_f32(x + static_cast<size_t>(c) * K + k);
            for (int r = 0; r < RR; ++r) acc[c][r] = vfmaq_f32(acc[c][r], xv, wv[r]);
        }
    }
    // Unrolled early, so that acc[c] has a constant index when GCC replaces the array by
    // registers: left to its later unrolling, GCC 12 (-O3) kept acc in memory and stored all
    // 16 accumulators in every step of k above (36 instructions per 16 FMLA, 28 without).
#pragma GCC unroll 4
    for (int c = 0; c < CC; ++c) {
        float tail[RR];
        for (int r = 0; r < RR; ++r) {
            float s = 0.0f;
            for (int i = k; i < K; ++i) s += x[static_cast<size_t>(c) * K + i] * w_at(w + static_cast<size_t>(r) * K + i);
            tail[r] = s;
        }
        store_rows<RR>(acc[c], tail, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t + c) * a.N + n);
    }
}

template <typename W>
void f_gemm(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) {
        int t = t_begin;
        for (; t + 4 <= t_end; t += 4) f_tile<W, 4, 4>(a, n, t);
        for (; t < t_end; ++t) f_tile<W, 4, 1>(a, n, t);
    }
    for (; n < n_end; ++n) {
        int t = t_begin;
        for (; t + 4 <= t_end; t += 4) f_tile<W, 1, 4>(a, n, t);
        for (; t < t_end; ++t) f_tile<W, 1, 1>(a, n, t);
    }
}

}  // namespace

void f32_gemm_neon(const Args& a, int t_begin, int t_end, int n_begin, int n_end) { f_gemm<float>(a, t_begin, t_end, n_begin, n_end); }

void f16_gemm_neon(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<uint16_t>(a, t_begin, t_end, n_begin, n_end);
}

void i8_gemm_neon(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    i8_gemm<NeonGemm<dot4_lanes>>(a, t_begin, t_end, n_begin, n_end, i8_rows_neon);
}

void f32_rows_neon(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const float* w = static_cast<const float*>(a.w) + static_cast<size_t>(n) * a.K;
        const float b = a.bias ? a.bias[n] : 0.0f;
        for (int t = 0; t < a.T; ++t) a.y[static_cast<size_t>(t) * a.N + n] = b + dot_f32(a.x + static_cast<size_t>(t) * a.K, w, a.K);
    }
}

void f16_rows_neon(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const uint16_t* w = static_cast<const uint16_t*>(a.w) + static_cast<size_t>(n) * a.K;
        const float b = a.bias ? a.bias[n] : 0.0f;
        for (int t = 0; t < a.T; ++t) a.y[static_cast<size_t>(t) * a.N + n] = b + dot_f16(a.x + static_cast<size_t>(t) * a.K, w, a.K);
    }
}

void i8_rows_neon(const Args& a, int n_begin, int n_end) { i8_rows<NeonI8<dot16>>(a, n_begin, n_end); }

// vcvtnq_s32_f32 rounds to nearest, ties to even, as __builtin_nearbyintf does in the
// default rounding mode: every variant quantizes x to the same integers.
void quantize_neon(const float* x, int K, int group, int8_t* xq, float* xs) {
    const int n_groups = (K + group - 1) / group;
    for (int g = 0; g < n_groups; ++g) {
        const int begin = g * group;
        const int end = min_int(K, begin + group);
        int k = begin;
        float32x4_t vmax = vdupq_n_f32(0.0f), vprobe = vdupq_n_f32(0.0f);  // probe: x * 0 summed (NaN for an inf or NaN)
        for (; k + 4 <= end; k += 4) {
            const float32x4_t v = vld1q_f32(x + k);
            vmax = vmaxq_f32(vmax, vabsq_f32(v));
            vprobe = vfmaq_f32(vprobe, v, vdupq_n_f32(0.0f));
        }
        float amax = vmaxvq_f32(vmax), probe = vaddvq_f32(vprobe);
        for (; k < end; ++k) {
            const float v = __builtin_fabsf(x[k]);
            amax = v > amax ? v : amax;
            probe += x[k] * 0.0f;
        }
        const float inv = group_quant_factor(amax, probe == 0.0f, &xs[g]);
        if (inv == 0.0f) {
            for (k = begin; k < end; ++k) xq[k] = 0;
            continue;
        }
        for (k = begin; k + 8 <= end; k += 8) {
            const int32x4_t lo = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k), inv));
            const int32x4_t hi = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k + 4), inv));
            vst1_s8(xq + k, vqmovn_s16(vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi))));
        }
        for (; k < end; ++k) xq[k] = static_cast<int8_t>(__builtin_nearbyintf(x[k] * inv));
    }
}

}  // namespace ember::kernels::linear_detail
