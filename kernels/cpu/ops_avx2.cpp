// x86-64 AVX2 + FMA bodies of attention, layernorm and activation (ops_variants.h), compiled
// with -mavx2 -mfma -mf16c (kernels/CMakeLists.txt) and called only on a CPU that has them.
// Everything but the exported entry points has internal linkage, so no AVX2 code is shared
// with the baseline objects through an inline function the linker could pick.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/ops_variants.h"

namespace ember::kernels::ops_detail {

namespace {

float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// e^x, Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-5 polynomial in r, 2^n built
// in the exponent bits. Inputs clamped to [-87, 88] (2^n stays a normal float); within about
// 2 ulp of std::exp there.
__m256 exp_ps(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
__m256 gelu_tanh_ps(__m256 x) {
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.7978845608f)),
                                   _mm256_fmadd_ps(x2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f)));
    const __m256 e = exp_ps(_mm256_mul_ps(u, _mm256_set1_ps(-2.0f)));
    return _mm256_div_ps(x, _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
}

// 0.5 x (1 + erf(x / sqrt 2)) with erfc(z) = P(t) e^(-z^2), t = 1 / (1 + p z), z = |x| / sqrt 2
// (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7): x >= 0 gives 0.5 x (2 - erfc), x < 0
// 0.5 x erfc, so neither side cancels.
__m256 gelu_erf_ps(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(0.70710678118654752f));
    const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(z, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    const __m256 erfc = _mm256_mul_ps(p, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(z, z))));
    const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 f = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, neg);
    return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), f);
}

template <typename F>
void map_inplace(float* x, size_t n, F f, ActivationKind kind) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) activation_plain(kind, x + i, n - i);
}

}  // namespace

namespace {

// Eight cache values widened to f32: a plain load, or F16C's vcvtph2ps for binary16.
__m256 load8(const float* p) { return _mm256_loadu_ps(p); }
__m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
float load1(const float* p) { return *p; }
float load1(const uint16_t* p) { return _cvtsh_ss(*p); }

// Decode's attention reads the KV cache key by key, a head's slice (head_size values) of each
// (AttentionShape's layout: contiguous keys in the backend's head-major cache). The four-key q.k
// loop and the 64-column weighted sum prefetch the slice kKeysAhead keys on. With the cache
// head-major the hardware prefetcher might have done it alone; without the hint decode ran
// 0.96x to 1.01x (full configuration, 1 thread), 0.82x to 1.02x (2 threads) and 0.78x to 0.99x
// (GPT-2 124M, 1023 tokens) in alternated pairs on a 2-core Xeon (2026-12-02).
constexpr int kKeysAhead = 16;

template <typename E>
void prefetch_row(const E* p, int n) {
    const char* b = reinterpret_cast<const char*>(p);
    for (size_t off = 0; off < sizeof(E) * static_cast<size_t>(n); off += 64) __builtin_prefetch(b + off);
}

// sum_k a[k] * b[k] over n values of a cache row: two accumulators of 8, then the scalar tail.
template <typename E>
float dot_row(const float* a, const E* b, int n) {
    int k = 0;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (; k + 16 <= n; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), load8(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), load8(b + k + 8), s1);
    }
    float acc = hsum(_mm256_add_ps(s0, s1));
    for (; k < n; ++k) acc += a[k] * load1(b + k);
    return acc;
}

template <typename E>
void scores_t(const float* q, const E* k, int ldk, int n_keys, int n, float scale, float* scores) {
    int j = 0;
    if (n % 8 == 0) {  // four keys per pass share the loads of q and one horizontal reduction
        for (; j + 4 <= n_keys; j += 4) {
            const E* k0 = k + static_cast<size_t>(j) * ldk;
            if (j + 4 + kKeysAhead <= n_keys)
                for (int r = 0; r < 4; ++r) prefetch_row(k0 + static_cast<size_t>(kKeysAhead + r) * ldk, n);
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < n; d += 8) {
                const __m256 vq = _mm256_loadu_ps(q + d);
                a0 = _mm256_fmadd_ps(vq, load8(k0 + d), a0);
                a1 = _mm256_fmadd_ps(vq, load8(k0 + ldk + d), a1);
                a2 = _mm256_fmadd_ps(vq, load8(k0 + 2 * ldk + d), a2);
                a3 = _mm256_fmadd_ps(vq, load8(k0 + 3 * ldk + d), a3);
            }
            const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));  // per half: s0..s3
            const __m128 sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            _mm_storeu_ps(scores + j, _mm_mul_ps(sum, _mm_set1_ps(scale)));
        }
    }
    for (; j < n_keys; ++j) scores[j] = dot_row(q, k + static_cast<size_t>(j) * ldk, n) * scale;
}

template <typename E>
void weighted_sum_t(const float* w, const E* v, int ldv, int n_keys, float* o, int n) {
    int d = 0;
    for (; d + 64 <= n; d += 64) {  // 64 columns (a head of 64) in one pass over the keys
        __m256 a[8];
        for (int c = 0; c < 8; ++c) a[c] = _mm256_setzero_ps();
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            if (j + kKeysAhead < n_keys) prefetch_row(vj + static_cast<size_t>(kKeysAhead) * ldv, 64);
            const __m256 wj = _mm256_set1_ps(w[j]);
            for (int c = 0; c < 8; ++c) a[c] = _mm256_fmadd_ps(wj, load8(vj + 8 * c), a[c]);
        }
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(o + d + 8 * c, a[c]);
    }
    for (; d + 32 <= n; d += 32) {  // 32 columns held in registers across the keys
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            const __m256 wj = _mm256_set1_ps(w[j]);
            a0 = _mm256_fmadd_ps(wj, load8(vj), a0);
            a1 = _mm256_fmadd_ps(wj, load8(vj + 8), a1);
            a2 = _mm256_fmadd_ps(wj, load8(vj + 16), a2);
            a3 = _mm256_fmadd_ps(wj, load8(vj + 24), a3);
        }
        _mm256_storeu_ps(o + d, a0);
        _mm256_storeu_ps(o + d + 8, a1);
        _mm256_storeu_ps(o + d + 16, a2);
        _mm256_storeu_ps(o + d + 24, a3);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a = _mm256_setzero_ps();
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(vj), a);
        _mm256_storeu_ps(o + d, a);
    }
    for (; d < n; ++d) {
        float acc = 0.0f;
        for (int j = 0; j < n_keys; ++j) acc += w[j] * load1(v + static_cast<size_t>(j) * ldv + d);
        o[d] = acc;
    }
}

// Four queries x two keys per pass (8 accumulators): each key's loads (and f16 widening) serve
// four queries, each query's serve two keys; the part of the keys past a pair, or a head size
// that is not a multiple of 8, one dot at a time.
template <typename E>
void scores4_t(const float* q, int ldq, const E* k, int ldk, int n_keys, int n, float scale, float* scores, int lds) {
    int j = 0;
    const __m128 vscale = _mm_set1_ps(scale);
    if (n % 8 == 0) {
        for (; j + 2 <= n_keys; j += 2) {
            const E* k0 = k + static_cast<size_t>(j) * ldk;
            __m256 a[4][2];
            for (int i = 0; i < 4; ++i) a[i][0] = a[i][1] = _mm256_setzero_ps();
            for (int d = 0; d < n; d += 8) {
                const __m256 kv0 = load8(k0 + d), kv1 = load8(k0 + ldk + d);
                for (int i = 0; i < 4; ++i) {
                    const __m256 vq = _mm256_loadu_ps(q + static_cast<size_t>(i) * ldq + d);
                    a[i][0] = _mm256_fmadd_ps(vq, kv0, a[i][0]);
                    a[i][1] = _mm256_fmadd_ps(vq, kv1, a[i][1]);
                }
            }
            for (int i = 0; i < 4; i += 2) {  // lanes: q_i k_j, q_i k_j+1, q_i+1 k_j, q_i+1 k_j+1
                const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[i][0], a[i][1]), _mm256_hadd_ps(a[i + 1][0], a[i + 1][1]));
                const __m128 sum = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), vscale);
                _mm_storel_pi(reinterpret_cast<__m64*>(scores + static_cast<size_t>(i) * lds + j), sum);
                _mm_storeh_pi(reinterpret_cast<__m64*>(scores + static_cast<size_t>(i + 1) * lds + j), sum);
            }
        }
    }
    for (; j < n_keys; ++j) {
        for (int i = 0; i < 4; ++i)
            scores[static_cast<size_t>(i) * lds + j] = dot_row(q + static_cast<size_t>(i) * ldq, k + static_cast<size_t>(j) * ldk, n) * scale;
    }
}

// Four rows of weights, 16 columns of v per pass over the keys (8 accumulators), then 8, then scalar.
template <typename E>
void weighted_sum4_t(const float* w, int ldw, const E* v, int ldv, int n_keys, float* o, int ldo, int n) {
    int d = 0;
    for (; d + 16 <= n; d += 16) {
        __m256 a[4][2];
        for (int i = 0; i < 4; ++i) a[i][0] = a[i][1] = _mm256_setzero_ps();
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            const __m256 v0 = load8(vj), v1 = load8(vj + 8);
            for (int i = 0; i < 4; ++i) {
                const __m256 wj = _mm256_set1_ps(w[static_cast<size_t>(i) * ldw + j]);
                a[i][0] = _mm256_fmadd_ps(wj, v0, a[i][0]);
                a[i][1] = _mm256_fmadd_ps(wj, v1, a[i][1]);
            }
        }
        for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(o + static_cast<size_t>(i) * ldo + d, a[i][0]);
            _mm256_storeu_ps(o + static_cast<size_t>(i) * ldo + d + 8, a[i][1]);
        }
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a[4];
        for (int i = 0; i < 4; ++i) a[i] = _mm256_setzero_ps();
        const E* vj = v + d;
        for (int j = 0; j < n_keys; ++j, vj += ldv) {
            const __m256 v0 = load8(vj);
            for (int i = 0; i < 4; ++i) a[i] = _mm256_fmadd_ps(_mm256_set1_ps(w[static_cast<size_t>(i) * ldw + j]), v0, a[i]);
        }
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(o + static_cast<size_t>(i) * ldo + d, a[i]);
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

void scores4_avx2(const float* q, int ldq, const float* k, int ldk, int n_keys, int n, float scale, float* scores, int lds) {
    scores4_t(q, ldq, k, ldk, n_keys, n, scale, scores, lds);
}
void weighted_sum4_avx2(const float* w, int ldw, const float* v, int ldv, int n_keys, float* o, int ldo, int n) {
    weighted_sum4_t(w, ldw, v, ldv, n_keys, o, ldo, n);
}
void scores4_f16_avx2(const float* q, int ldq, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores, int lds) {
    scores4_t(q, ldq, k, ldk, n_keys, n, scale, scores, lds);
}
void weighted_sum4_f16_avx2(const float* w, int ldw, const uint16_t* v, int ldv, int n_keys, float* o, int ldo, int n) {
    weighted_sum4_t(w, ldw, v, ldv, n_keys, o, ldo, n);
}

void scores_avx2(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores) {
    scores_t(q, k, ldk, n_keys, n, scale, scores);
}

void scores_f16_avx2(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores) {
    scores_t(q, k, ldk, n_keys, n, scale, scores);
}

void weighted_sum_avx2(const float* w, const float* v, int ldv, int n_keys, float* o, int n) {
    weighted_sum_t(w, v, ldv, n_keys, o, n);
}

void weighted_sum_f16_avx2(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n) {
    weighted_sum_t(w, v, ldv, n_keys, o, n);
}

// vcvtps2ph with round to nearest even: half.h's float_to_half on every finite value and inf.
void round_f16_avx2(const float* x, uint16_t* y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    }
    for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void softmax_avx2(float* w, int n) {
    int j = 0;
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(w + j));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float mx = _mm_cvtss_f32(m4);
    for (; j < n; ++j) mx = std::max(mx, w[j]);
    vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(w + j), vmx));
        _mm256_storeu_ps(w + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    float sum = hsum(vs);
    for (; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
    const float inv = 1.0f / sum;
    const __m256 vinv = _mm256_set1_ps(inv);
    for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(w + j, _mm256_mul_ps(_mm256_loadu_ps(w + j), vinv));
    for (; j < n; ++j) w[j] *= inv;
}

void layernorm_row_avx2(const float* x, int C, const float* weight, const float* bias, float eps, float* out) {
    // Two passes, as the plain body: the mean, then the centred variance.
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int c = 0;
    for (; c + 16 <= C; c += 16) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + c));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + c + 8));
    }
    float sum = hsum(_mm256_add_ps(s0, s1));
    for (; c < C; ++c) sum += x[c];
    const float mean = sum / C;
    const __m256 vm = _mm256_set1_ps(mean);
    s0 = _mm256_setzero_ps(), s1 = s0;
    for (c = 0; c + 16 <= C; c += 16) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + c), vm);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + c + 8), vm);
        s0 = _mm256_fmadd_ps(d0, d0, s0);
        s1 = _mm256_fmadd_ps(d1, d1, s1);
    }
    float sq = hsum(_mm256_add_ps(s0, s1));
    for (; c < C; ++c) sq += (x[c] - mean) * (x[c] - mean);
    const float rstd = 1.0f / std::sqrt(sq / C + eps);
    const __m256 vr = _mm256_set1_ps(rstd);
    for (c = 0; c + 8 <= C; c += 8) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + c), vm), vr);
        const __m256 b = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
        _mm256_storeu_ps(out + c, _mm256_fmadd_ps(xh, _mm256_loadu_ps(weight + c), b));
    }
    for (; c < C; ++c) out[c] = (x[c] - mean) * rstd * weight[c] + (bias ? bias[c] : 0.0f);
}

void activation_avx2(ActivationKind kind, float* x, size_t n) {
    switch (kind) {
    case ActivationKind::ReLU:
        map_inplace(x, n, [](__m256 v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }, kind);
        break;
    case ActivationKind::GeluErf: map_inplace(x, n, [](__m256 v) { return gelu_erf_ps(v); }, kind); break;
    case ActivationKind::GeluTanh: map_inplace(x, n, [](__m256 v) { return gelu_tanh_ps(v); }, kind); break;
    }
}

}  // namespace ember::kernels::ops_detail
