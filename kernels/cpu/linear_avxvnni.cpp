// linear()'s int8 kernel with AVX-VNNI (vpdpbusd on YMM; compiled with -mavx2 -mfma -mf16c
// -mavxvnni, run only where cpu_features.h finds it). Internal functions only, no std:: inline
// function (see linear_avx2.cpp).
//
// vpdpbusd multiplies unsigned by signed bytes. W's bytes are made unsigned by adding 128
// (xor 0x80), and the surplus, 128 * sum(x) over the group, is subtracted; it depends on x
// only, so one more vpdpbusd per chunk serves all the rows of a block (4, or 8 in the 8-row
// decode kernel):
//   sum_k w_k x_k = sum_k (w_k + 128) x_k - 128 sum_k x_k.
#include <immintrin.h>

#include "kernels/cpu/linear_gemm_int8.h"
#include "kernels/cpu/linear_int8_block.h"
#include "kernels/cpu/linear_rows8_x86.h"

namespace ember::kernels::linear_detail {

namespace {

// linear_int8_block.h's policy: W flipped to unsigned, 128 * sum(x) per group subtracted.
struct VnniDot {
    using Vec = __m256i;
    using Sum = __m256i;
    using Acc = __m256;
    using XVec = Vec;
    static constexpr int kChunk = 32;
    struct Group {
        __m256i surplus;  // 128 * sum(x) over the group so far, in 8 lanes
    };
    static __m256i flip() { return _mm256_set1_epi8(static_cast<char>(0x80)); }
    static Vec load(const int8_t* p) { return load32(p); }
    static XVec load_x(const int8_t* p) { return load32(p); }
    static void begin(Group& g) { g.surplus = _mm256_setzero_si256(); }
    static void step(Group& g, Vec x) { g.surplus = _mm256_dpbusd_avx_epi32(g.surplus, flip(), x); }
    static Sum zero() { return _mm256_setzero_si256(); }
    static Sum dot(Sum s, Vec x, Vec w) { return _mm256_dpbusd_avx_epi32(s, _mm256_xor_si256(w, flip()), x); }
    static Acc acc_zero() { return _mm256_setzero_ps(); }
    static Acc fma(Acc acc, Sum s, const Group& g, float scale) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s, g.surplus)), _mm256_set1_ps(scale), acc);
    }
};

// linear_gemm_int8.h's policy: 8 rows of x a YMM, 2 YMM a panel, 2 rows of W a tile; W's words
// flipped to unsigned, 128 * sum(x) subtracted per group.
struct GemmVnni {
    static constexpr int P = 8, NB = 2, R = 2, kUnit = 4;
    static constexpr bool kSurplus = true, kLanes = false;
    using VecI = __m256i;
    using VecF = __m256;
    static VecI load_x(const int8_t* p) { return load32(p); }
    static VecI bcast_w(uint32_t w4) { return _mm256_set1_epi32(static_cast<int>(w4 ^ 0x80808080u)); }
    static VecI dot(VecI s, VecI x, VecI w) { return _mm256_dpbusd_avx_epi32(s, w, x); }
    static VecI izero() { return _mm256_setzero_si256(); }
    static VecF fzero() { return _mm256_setzero_ps(); }
    static VecF group_fma(VecF acc, VecI s, const int32_t* surplus, const float* xs, float ws) {
        const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(s, _mm256_load_si256(reinterpret_cast<const __m256i*>(surplus))));
        return _mm256_fmadd_ps(d, _mm256_mul_ps(_mm256_load_ps(xs), _mm256_set1_ps(ws)), acc);
    }
    static void store(float* out, VecF v) { _mm256_storeu_ps(out, v); }
};

// linear_rows8_x86.h's policy: as VnniDot, each row's sum starting at -128 * sum(x).
struct VnniRows8 {
    using I = __m256i;
    using X = I;
    static X load_x(const int8_t* p) { return load(p); }
    static constexpr int kBytes = 32;
    static I load(const int8_t* p) { return load32(p); }
    static I start(const I* x, int n) {
        __m256i surplus = _mm256_setzero_si256();
        for (int c = 0; c < n; ++c) surplus = _mm256_dpbusd_avx_epi32(surplus, VnniDot::flip(), x[c]);
        return _mm256_sub_epi32(_mm256_setzero_si256(), surplus);
    }
    static I dot(I s, I x, const int8_t* w) { return VnniDot::dot(s, x, load32(w)); }
    static __m256i fold(I s) { return s; }
};

}  // namespace

// Decode of cache_resident weights takes the 8-row kernel (linear_rows8_x86.h), prefetching
// 8 KiB ahead as linear_avx512.cpp does (measured there, on AVX-512 VNNI).
void i8_rows_avxvnni(const Args& a, int n_begin, int n_end) {
    if (!takes_rows8_decode(a.cache_resident, a.T, a.K, a.group)) return i8_rows<VnniDot>(a, n_begin, n_end);
    rows8<VnniRows8, 8192>(a, n_begin, n_end, i8_rows<VnniDot>);
}

void i8_gemm_avxvnni(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    i8_gemm<GemmVnni>(a, t_begin, t_end, n_begin, n_end, i8_rows_avxvnni);
}

}  // namespace ember::kernels::linear_detail
