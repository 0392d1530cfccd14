// linear()'s NEON kernels (Advanced SIMD, part of every aarch64 CPU: no extra flags).
#include <arm_neon.h>

#include "kernels/cpu/half.h"
#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {

namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

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

// The part of a group past its last whole 16-byte chunk (short groups, K or the group size
// not a multiple of 16), R rows of W (stride K): tail[r] += x_scale * w_scale[r * gpr] * x . w_r.
template <int R>
void add_tail(const int8_t* x, const int8_t* w, int K, int k, int end, float x_scale, const float* w_scale, int gpr,
              float* tail) {
    for (int r = 0; r < R; ++r) {
        int s = 0;
        for (int i = k; i < end; ++i) s += x[i] * w[static_cast<size_t>(r) * K + i];
        tail[r] += static_cast<float>(s) * x_scale * w_scale[static_cast<size_t>(r) * gpr];
    }
}

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

// R rows of W (from row n) against every row of x: x loaded once per chunk for R rows.
template <int R>
void i8_block(const Args& a, int n) {
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    for (int t = 0; t < a.T; ++t) {
        const int8_t* x = a.xq + static_cast<size_t>(t) * K;
        const float* xs = a.xs + static_cast<size_t>(t) * gpr;
        float32x4_t acc[R];
        float tail[R];
        for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f), tail[r] = 0.0f;
        for (int g = 0; g < gpr; ++g) {
            const int end = min_int(K, (g + 1) * group);
            int32x4_t s[R];
            for (int r = 0; r < R; ++r) s[r] = vdupq_n_s32(0);
            int k = g * group;
            for (; k + 16 <= end; k += 16) {
                const int8x16_t vx = vld1q_s8(x + k);
                for (int r = 0; r < R; ++r) s[r] = dot16(s[r], vx, vld1q_s8(w + static_cast<size_t>(r) * K + k));
            }
            for (int r = 0; r < R; ++r) {
                const float scale = xs[g] * ws[static_cast<size_t>(r) * gpr + g];
                acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s[r]), scale);
            }
            if (k < end) add_tail<R>(x, w, K, k, end, xs[g], ws + g, gpr, tail);
        }
        store_rows<R>(acc, tail, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t) * a.N + n);
    }
}

}  // namespace

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

void i8_rows_neon(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<4>(a, n);
    for (; n < n_end; ++n) i8_block<1>(a, n);
}

// vcvtnq_s32_f32 rounds to nearest, ties to even, as __builtin_nearbyintf does in the
// default rounding mode: every variant quantizes x to the same integers.
void quantize_neon(const float* x, int K, int group, int8_t* xq, float* xs) {
    const int n_groups = (K + group - 1) / group;
    for (int g = 0; g < n_groups; ++g) {
        const int begin = g * group;
        const int end = min_int(K, begin + group);
        int k = begin;
        float32x4_t vmax = vdupq_n_f32(0.0f);
        for (; k + 4 <= end; k += 4) vmax = vmaxq_f32(vmax, vabsq_f32(vld1q_f32(x + k)));
        float amax = vmaxvq_f32(vmax);
        for (; k < end; ++k) {
            const float v = __builtin_fabsf(x[k]);
            amax = v > amax ? v : amax;
        }
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        xs[g] = amax / 127.0f;
        for (k = begin; k + 8 <= end; k += 8) {
            const int32x4_t lo = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k), inv));
            const int32x4_t hi = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k + 4), inv));
            vst1_s8(xq + k, vqmovn_s16(vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi))));
        }
        for (; k < end; ++k) xq[k] = static_cast<int8_t>(__builtin_nearbyintf(x[k] * inv));
    }
}

}  // namespace ember::kernels::linear_detail
