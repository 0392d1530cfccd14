// linear()'s NEON kernels (Advanced SIMD, part of every aarch64 CPU: no extra flags).
#include <arm_neon.h>

#include "kernels/cpu/half.h"
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

void i8_rows_neon(const Args& a, int n_begin, int n_end) { i8_rows<NeonI8<dot16>>(a, n_begin, n_end); }

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
