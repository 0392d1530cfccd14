// aarch64 NEON bodies of attention, layernorm and activation (ops_variants.h). Advanced SIMD
// is part of every aarch64 CPU, so this file needs no extra flags; it is still reached only
// through the run-time choice, so EMBER_CPU_KERNELS=plain runs the plain bodies.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops_variants.h"

namespace ember::kernels::ops_detail {

namespace {

// e^x as ops_avx2.cpp's exp_ps (Cephes' expf, inputs clamped to [-87, 88]).
float32x4_t exp_ps(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.0f)), vdupq_n_f32(88.0f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    const float32x4_t y = vaddq_f32(vfmaq_f32(r, vmulq_f32(p, r), r), vdupq_n_f32(1.0f));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

// As ops_avx2.cpp: x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
float32x4_t gelu_tanh_ps(float32x4_t x) {
    const float32x4_t x2 = vmulq_f32(x, x);
    const float32x4_t u = vmulq_f32(vmulq_f32(x, vdupq_n_f32(0.7978845608f)),
                                    vfmaq_f32(vdupq_n_f32(1.0f), x2, vdupq_n_f32(0.044715f)));
    const float32x4_t e = exp_ps(vmulq_f32(u, vdupq_n_f32(-2.0f)));
    return vdivq_f32(x, vaddq_f32(e, vdupq_n_f32(1.0f)));
}

// As ops_avx2.cpp: erfc from Abramowitz and Stegun 7.1.26 on |x| / sqrt 2.
float32x4_t gelu_erf_ps(float32x4_t x) {
    const float32x4_t z = vmulq_f32(vabsq_f32(x), vdupq_n_f32(0.70710678118654752f));
    const float32x4_t t = vdivq_f32(vdupq_n_f32(1.0f), vfmaq_f32(vdupq_n_f32(1.0f), z, vdupq_n_f32(0.3275911f)));
    float32x4_t p = vdupq_n_f32(1.061405429f);
    p = vfmaq_f32(vdupq_n_f32(-1.453152027f), p, t);
    p = vfmaq_f32(vdupq_n_f32(1.421413741f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-0.284496736f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.254829592f), p, t);
    p = vmulq_f32(p, t);
    const float32x4_t erfc = vmulq_f32(p, exp_ps(vnegq_f32(vmulq_f32(z, z))));
    const uint32x4_t neg = vcltq_f32(x, vdupq_n_f32(0.0f));
    const float32x4_t f = vbslq_f32(neg, erfc, vsubq_f32(vdupq_n_f32(2.0f), erfc));
    return vmulq_f32(vmulq_f32(x, vdupq_n_f32(0.5f)), f);
}

template <typename F>
void map_inplace(float* x, size_t n, F f, ActivationKind kind) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, f(vld1q_f32(x + i)));
    if (i < n) activation_plain(kind, x + i, n - i);
}

}  // namespace

namespace {

// Four cache values widened to f32: a plain load, or fcvtl for binary16.
float32x4_t load4(const float* p) { return vld1q_f32(p); }
float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
float load1(const float* p) { return *p; }
float load1(const uint16_t* p) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(*p))), 0); }

// sum_k a[k] * b[k] over n values of a cache row: two accumulators of 4, then the scalar tail.
template <typename E>
float dot_row(const float* a, const E* b, int n) {
    int k = 0;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    for (; k + 8 <= n; k += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + k), load4(b + k));
        s1 = vfmaq_f32(s1, vld1q_f32(a + k + 4), load4(b + k + 4));
    }
    float acc = vaddvq_f32(vaddq_f32(s0, s1));
    for (; k < n; ++k) acc += a[k] * load1(b + k);
    return acc;
}

template <typename E>
void scores_t(const float* q, const E* k, int ldk, int n_keys, int n, float scale, float* scores) {
    int j = 0;
    if (n % 4 == 0) {  // four keys per pass share the loads of q
        for (; j + 4 <= n_keys; j += 4) {
            const E* k0 = k + static_cast<size_t>(j) * ldk;
            float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < n; d += 4) {
                const float32x4_t vq = vld1q_f32(q + d);
                a0 = vfmaq_f32(a0, vq, load4(k0 + d));
                a1 = vfmaq_f32(a1, vq, load4(k0 + ldk + d));
                a2 = vfmaq_f32(a2, vq, load4(k0 + 2 * ldk + d));
                a3 = vfmaq_f32(a3, vq, load4(k0 + 3 * ldk + d));
            }
            const float32x4_t sum = vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));  // s0 s1 s2 s3
            vst1q_f32(scores + j, vmulq_n_f32(sum, scale));
        }
    }
    for (; j < n_keys; ++j) scores[j] = dot_row(q, k + static_cast<size_t>(j) * ldk, n) * scale;
}

template <typename E>
void weighted_sum_t(const float* w, const E* v, int ldv, int n_keys, float* o, int n) {
    int d = 0;
    for (; d + 16 <= n; d += 16) {  // 16 columns held in registers across the keys
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            const float32x4_t wj = vdupq_n_f32(w[j]);
            a0 = vfmaq_f32(a0, wj, load4(vj));
            a1 = vfmaq_f32(a1, wj, load4(vj + 4));
            a2 = vfmaq_f32(a2, wj, load4(vj + 8));
            a3 = vfmaq_f32(a3, wj, load4(vj + 12));
        }
        vst1q_f32(o + d, a0);
        vst1q_f32(o + d + 4, a1);
        vst1q_f32(o + d + 8, a2);
        vst1q_f32(o + d + 12, a3);
    }
    for (; d + 4 <= n; d += 4) {
        float32x4_t a = vdupq_n_f32(0.0f);
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) a = vfmaq_n_f32(a, load4(vj), w[j]);
        vst1q_f32(o + d, a);
    }
    for (; d < n; ++d) {
        float acc = 0.0f;
        for (int j = 0; j < n_keys; ++j) acc += w[j] * load1(v + static_cast<size_t>(j) * ldv + d);
        o[d] = acc;
    }
}

// Four queries x two keys per pass (8 accumulators), as ops_avx2.cpp's: each key's loads (and
// f16 widening) serve four queries, each query's serve two keys; the keys past a pair, or a head
// size that is not a multiple of 4, one dot at a time.
template <typename E>
void scores4_t(const float* q, int ldq, const E* k, int ldk, int n_keys, int n, float scale, float* scores, int lds) {
    int j = 0;
    if (n % 4 == 0) {
        for (; j + 2 <= n_keys; j += 2) {
            const E* k0 = k + static_cast<size_t>(j) * ldk;
            float32x4_t a[4][2];
            for (int i = 0; i < 4; ++i) a[i][0] = a[i][1] = vdupq_n_f32(0.0f);
            for (int d = 0; d < n; d += 4) {
                const float32x4_t kv0 = load4(k0 + d), kv1 = load4(k0 + ldk + d);
                for (int i = 0; i < 4; ++i) {
                    const float32x4_t vq = vld1q_f32(q + static_cast<size_t>(i) * ldq + d);
                    a[i][0] = vfmaq_f32(a[i][0], vq, kv0);
                    a[i][1] = vfmaq_f32(a[i][1], vq, kv1);
                }
            }
            for (int i = 0; i < 4; i += 2) {  // lanes: q_i k_j, q_i k_j+1, q_i+1 k_j, q_i+1 k_j+1
                const float32x4_t sum =
                    vmulq_n_f32(vpaddq_f32(vpaddq_f32(a[i][0], a[i][1]), vpaddq_f32(a[i + 1][0], a[i + 1][1])), scale);
                vst1_f32(scores + static_cast<size_t>(i) * lds + j, vget_low_f32(sum));
                vst1_f32(scores + static_cast<size_t>(i + 1) * lds + j, vget_high_f32(sum));
            }
        }
    }
    for (; j < n_keys; ++j) {
        for (int i = 0; i < 4; ++i)
            scores[static_cast<size_t>(i) * lds + j] = dot_row(q + static_cast<size_t>(i) * ldq, k + static_cast<size_t>(j) * ldk, n) * scale;
    }
}

// Four rows of weights, 16 columns of v per pass over the keys (16 accumulators of aarch64's 32
// registers), then 4, then scalar.
template <typename E>
void weighted_sum4_t(const float* w, int ldw, const E* v, int ldv, int n_keys, float* o, int ldo, int n) {
    int d = 0;
    for (; d + 16 <= n; d += 16) {
        float32x4_t a[4][4];
        for (int i = 0; i < 4; ++i) a[i][0] = a[i][1] = a[i][2] = a[i][3] = vdupq_n_f32(0.0f);
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            const float32x4_t v0 = load4(vj), v1 = load4(vj + 4), v2 = load4(vj + 8), v3 = load4(vj + 12);
            for (int i = 0; i < 4; ++i) {
                const float wj = w[static_cast<size_t>(i) * ldw + j];
                a[i][0] = vfmaq_n_f32(a[i][0], v0, wj);
                a[i][1] = vfmaq_n_f32(a[i][1], v1, wj);
                a[i][2] = vfmaq_n_f32(a[i][2], v2, wj);
                a[i][3] = vfmaq_n_f32(a[i][3], v3, wj);
            }
        }
        for (int i = 0; i < 4; ++i) {
            float* oi = o + static_cast<size_t>(i) * ldo + d;
            vst1q_f32(oi, a[i][0]);
            vst1q_f32(oi + 4, a[i][1]);
            vst1q_f32(oi + 8, a[i][2]);
            vst1q_f32(oi + 12, a[i][3]);
        }
    }
    for (; d + 4 <= n; d += 4) {
        float32x4_t a[4];
        for (int i = 0; i < 4; ++i) a[i] = vdupq_n_f32(0.0f);
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            const float32x4_t v0 = load4(vj);
            for (int i = 0; i < 4; ++i) a[i] = vfmaq_n_f32(a[i], v0, w[static_cast<size_t>(i) * ldw + j]);
        }
        for (int i = 0; i < 4; ++i) vst1q_f32(o + static_cast<size_t>(i) * ldo + d, a[i]);
    }
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) {
            float acc = 0.0f;
            for (int j = 0; j < n_keys; ++j) acc += w[static_cast<size_t>(i) * ldw + j] * load1(v + static_cast<size_t>(j) * ldv + d);
            o[static_cast<size_t>(i) * ldo + d] = acc;
        }
    }
}

}  // namespace

void scores4_neon(const float* q, int ldq, const float* k, int ldk, int n_keys, int n, float scale, float* scores, int lds) {
    scores4_t(q, ldq, k, ldk, n_keys, n, scale, scores, lds);
}
void weighted_sum4_neon(const float* w, int ldw, const float* v, int ldv, int n_keys, float* o, int ldo, int n) {
    weighted_sum4_t(w, ldw, v, ldv, n_keys, o, ldo, n);
}
void scores4_f16_neon(const float* q, int ldq, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores, int lds) {
    scores4_t(q, ldq, k, ldk, n_keys, n, scale, scores, lds);
}
void weighted_sum4_f16_neon(const float* w, int ldw, const uint16_t* v, int ldv, int n_keys, float* o, int ldo, int n) {
    weighted_sum4_t(w, ldw, v, ldv, n_keys, o, ldo, n);
}

void scores_neon(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores) {
    scores_t(q, k, ldk, n_keys, n, scale, scores);
}

void scores_f16_neon(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores) {
    scores_t(q, k, ldk, n_keys, n, scale, scores);
}

void weighted_sum_neon(const float* w, const float* v, int ldv, int n_keys, float* o, int n) {
    weighted_sum_t(w, v, ldv, n_keys, o, n);
}

void weighted_sum_f16_neon(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n) {
    weighted_sum_t(w, v, ldv, n_keys, o, n);
}

// fcvtn under the default FPCR rounding (round to nearest even): half.h's float_to_half on
// every finite value and inf.
void round_f16_neon(const float* x, uint16_t* y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; ++i) y[i] = vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(x[i]))), 0);
}

void softmax_neon(float* w, int n) {
    int j = 0;
    float32x4_t vmx = vdupq_n_f32(-INFINITY);
    for (; j + 4 <= n; j += 4) vmx = vmaxq_f32(vmx, vld1q_f32(w + j));
    float mx = vmaxvq_f32(vmx);
    for (; j < n; ++j) mx = std::max(mx, w[j]);
    vmx = vdupq_n_f32(mx);
    float32x4_t vs = vdupq_n_f32(0.0f);
    for (j = 0; j + 4 <= n; j += 4) {
        const float32x4_t e = exp_ps(vsubq_f32(vld1q_f32(w + j), vmx));
        vst1q_f32(w + j, e);
        vs = vaddq_f32(vs, e);
    }
    float sum = vaddvq_f32(vs);
    for (; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
    const float inv = 1.0f / sum;
    for (j = 0; j + 4 <= n; j += 4) vst1q_f32(w + j, vmulq_n_f32(vld1q_f32(w + j), inv));
    for (; j < n; ++j) w[j] *= inv;
}

void layernorm_row_neon(const float* x, int C, const float* weight, const float* bias, float eps, float* out) {
    // Two passes, as the plain body: the mean, then the centred variance.
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int c = 0;
    for (; c + 8 <= C; c += 8) {
        s0 = vaddq_f32(s0, vld1q_f32(x + c));
        s1 = vaddq_f32(s1, vld1q_f32(x + c + 4));
    }
    float sum = vaddvq_f32(vaddq_f32(s0, s1));
    for (; c < C; ++c) sum += x[c];
    const float mean = sum / C;
    const float32x4_t vm = vdupq_n_f32(mean);
    s0 = vdupq_n_f32(0.0f), s1 = s0;
    for (c = 0; c + 8 <= C; c += 8) {
        const float32x4_t d0 = vsubq_f32(vld1q_f32(x + c), vm);
        const float32x4_t d1 = vsubq_f32(vld1q_f32(x + c + 4), vm);
        s0 = vfmaq_f32(s0, d0, d0);
        s1 = vfmaq_f32(s1, d1, d1);
    }
    float sq = vaddvq_f32(vaddq_f32(s0, s1));
    for (; c < C; ++c) sq += (x[c] - mean) * (x[c] - mean);
    const float rstd = 1.0f / std::sqrt(sq / C + eps);
    for (c = 0; c + 4 <= C; c += 4) {
        const float32x4_t xh = vmulq_n_f32(vsubq_f32(vld1q_f32(x + c), vm), rstd);
        const float32x4_t b = bias ? vld1q_f32(bias + c) : vdupq_n_f32(0.0f);
        vst1q_f32(out + c, vfmaq_f32(b, xh, vld1q_f32(weight + c)));
    }
    for (; c < C; ++c) out[c] = (x[c] - mean) * rstd * weight[c] + (bias ? bias[c] : 0.0f);
}

void activation_neon(ActivationKind kind, float* x, size_t n) {
    switch (kind) {
    case ActivationKind::ReLU:
        map_inplace(x, n, [](float32x4_t v) {  // a select, not vmaxq (which passes NaN): as the plain x > 0 ? x : 0
            return vbslq_f32(vcgtq_f32(v, vdupq_n_f32(0.0f)), v, vdupq_n_f32(0.0f));
        }, kind);
        break;
    case ActivationKind::GeluErf: map_inplace(x, n, [](float32x4_t v) { return gelu_erf_ps(v); }, kind); break;
    case ActivationKind::GeluTanh: map_inplace(x, n, [](float32x4_t v) { return gelu_tanh_ps(v); }, kind); break;
    }
}

}  // namespace ember::kernels::ops_detail
