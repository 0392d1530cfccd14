// linear()'s int8 kernel with AVX-VNNI (vpdpbusd on YMM; compiled with -mavx2 -mfma -mf16c
// -mavxvnni, run only where cpu_features.h finds it). Internal functions only, no std:: inline
// function (see linear_avx2.cpp).
//
// vpdpbusd multiplies unsigned by signed bytes. W's bytes are made unsigned by adding 128
// (xor 0x80), and the surplus, 128 * sum(x) over the group, is subtracted; it depends on x
// only, so one more vpdpbusd per chunk serves all four rows:
//   sum_k w_k x_k = sum_k (w_k + 128) x_k - 128 sum_k x_k.
#include <immintrin.h>

#include "kernels/cpu/linear_int8_block.h"

namespace ember::kernels::linear_detail {

namespace {

// linear_int8_block.h's policy: W flipped to unsigned, 128 * sum(x) per group subtracted.
struct VnniDot {
    using Vec = __m256i;
    using Sum = __m256i;
    using Acc = __m256;
    static constexpr int kChunk = 32;
    struct Group {
        __m256i surplus;  // 128 * sum(x) over the group so far, in 8 lanes
    };
    static __m256i flip() { return _mm256_set1_epi8(static_cast<char>(0x80)); }
    static Vec load(const int8_t* p) { return load32(p); }
    static void begin(Group& g) { g.surplus = _mm256_setzero_si256(); }
    static void step(Group& g, Vec x) { g.surplus = _mm256_dpbusd_avx_epi32(g.surplus, flip(), x); }
    static Sum zero() { return _mm256_setzero_si256(); }
    static Sum dot(Sum s, Vec x, Vec w) { return _mm256_dpbusd_avx_epi32(s, _mm256_xor_si256(w, flip()), x); }
    static Acc acc_zero() { return _mm256_setzero_ps(); }
    static Acc fma(Acc acc, Sum s, const Group& g, float scale) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s, g.surplus)), _mm256_set1_ps(scale), acc);
    }
};

}  // namespace

void i8_rows_avxvnni(const Args& a, int n_begin, int n_end) { i8_rows<VnniDot>(a, n_begin, n_end); }

}  // namespace ember::kernels::linear_detail
