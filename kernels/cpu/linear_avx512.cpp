// linear()'s int8 kernel with AVX-512 VNNI (vpdpbusd on ZMM; compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni and AVX2's flags, run only where cpu_features.h finds
// them). Internal functions only, no std:: inline function (see linear_avx2.cpp).
//
// As in linear_avxvnni.cpp: sum_k w_k x_k = sum_k (w_k + 128) x_k - 128 sum_k x_k, W's bytes
// made unsigned by xor 0x80. A group's last chunk (short groups, K not a multiple of 64) is
// read with a byte mask: masked bytes load as 0 in x, so they add nothing to either sum.
#include <immintrin.h>

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {

namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

template <int R>
void i8_block(const Args& a, int n) {
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int t = 0; t < a.T; ++t) {
        const int8_t* x = a.xq + static_cast<size_t>(t) * K;
        const float* xs = a.xs + static_cast<size_t>(t) * gpr;
        __m512 acc[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
        for (int g = 0; g < gpr; ++g) {
            const int end = min_int(K, (g + 1) * group);
            __m512i s[R];
            for (int r = 0; r < R; ++r) s[r] = _mm512_setzero_si512();
            __m512i surplus = _mm512_setzero_si512();  // 128 * sum(x), in 16 lanes
            for (int k = g * group; k < end; k += 64) {
                const int left = end - k;
                const __mmask64 m = left >= 64 ? ~0ULL : (1ULL << left) - 1;
                const __m512i vx = _mm512_maskz_loadu_epi8(m, x + k);
                surplus = _mm512_dpbusd_epi32(surplus, flip, vx);
                for (int r = 0; r < R; ++r) {
                    const __m512i vw = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, w + static_cast<size_t>(r) * K + k), flip);
                    s[r] = _mm512_dpbusd_epi32(s[r], vw, vx);
                }
            }
            for (int r = 0; r < R; ++r) {
                const float scale = xs[g] * ws[static_cast<size_t>(r) * gpr + g];
                const __m512 d = _mm512_cvtepi32_ps(_mm512_sub_epi32(s[r], surplus));
                acc[r] = _mm512_fmadd_ps(d, _mm512_set1_ps(scale), acc[r]);
            }
        }
        float* y = a.y + static_cast<size_t>(t) * a.N + n;
        for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]) + (a.bias ? a.bias[n + r] : 0.0f);
    }
}

}  // namespace

void i8_rows_avx512(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<4>(a, n);
    for (; n < n_end; ++n) i8_block<1>(a, n);
}

}  // namespace ember::kernels::linear_detail
