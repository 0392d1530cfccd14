// linear()'s int8 kernel with AVX-VNNI (vpdpbusd on YMM; compiled with -mavx2 -mfma -mf16c
// -mavxvnni, run only where cpu_features.h finds it). Internal functions only, no std:: inline
// function (see linear_avx2.cpp).
//
// vpdpbusd multiplies unsigned by signed bytes. W's bytes are made unsigned by adding 128
// (xor 0x80), and the surplus, 128 * sum(x) over the group, is subtracted; it depends on x
// only, so one more vpdpbusd per chunk serves all four rows:
//   sum_k w_k x_k = sum_k (w_k + 128) x_k - 128 sum_k x_k.
#include <immintrin.h>

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {

namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The part of a group past its last whole 32-byte chunk (short groups, K or the group size
// not a multiple of 32), R rows of W (stride K): tail[r] += x_scale * w_scale[r * gpr] * x . w_r.
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

// R rows of W (from row n) against every row of x: x loaded once per chunk for R rows.
template <int R>
void i8_block(const Args& a, int n) {
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int t = 0; t < a.T; ++t) {
        const int8_t* x = a.xq + static_cast<size_t>(t) * K;
        const float* xs = a.xs + static_cast<size_t>(t) * gpr;
        __m256 acc[R];
        float tail[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), tail[r] = 0.0f;
        for (int g = 0; g < gpr; ++g) {
            const int end = min_int(K, (g + 1) * group);
            __m256i s[R];
            for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_si256();
            __m256i surplus = _mm256_setzero_si256();  // 128 * sum(x), in 8 lanes
            int k = g * group;
            for (; k + 32 <= end; k += 32) {
                const __m256i vx = load32(x + k);
                surplus = _mm256_dpbusd_avx_epi32(surplus, flip, vx);
                for (int r = 0; r < R; ++r) {
                    const __m256i vw = _mm256_xor_si256(load32(w + static_cast<size_t>(r) * K + k), flip);
                    s[r] = _mm256_dpbusd_avx_epi32(s[r], vw, vx);
                }
            }
            for (int r = 0; r < R; ++r) {
                const float scale = xs[g] * ws[static_cast<size_t>(r) * gpr + g];
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s[r], surplus)), _mm256_set1_ps(scale), acc[r]);
            }
            if (k < end) add_tail<R>(x, w, K, k, end, xs[g], ws + g, gpr, tail);
        }
        store_rows<R>(acc, tail, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t) * a.N + n);
    }
}

}  // namespace

void i8_rows_avxvnni(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<4>(a, n);
    for (; n < n_end; ++n) i8_block<1>(a, n);
}

}  // namespace ember::kernels::linear_detail
