// The avx2 int8 dot product and its policies for linear_int8_block.h's 4-row kernel (Avx2Dot)
// and linear_rows8_x86.h's 8-row decode kernel (Avx2Rows8): linear_avx2.cpp's, and
// bench/avx2_dot_ab.cpp's, which times them against the form before. Included only by code
// built with AVX2; internal linkage (an anonymous namespace), as linear_int8_block.h.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/linear_int8_block.h"

namespace ember::kernels::linear_detail {
namespace {

// 32 bytes of quantized x with their magnitudes, made once and used for every row of W.
struct XAbs {
    __m256i x, abs;
};

inline XAbs load_x_abs(const int8_t* p) {
    const __m256i x = load32(p);
    return {x, _mm256_sign_epi8(x, x)};
}

// 32 int8 products of x and w summed into 8 int32. maddubs takes an unsigned operand: |x|
// times w with x's sign, 4 instructions a row (|x| is shared by the rows). Exact while w
// holds no -128 (its negation wraps), which the loader refuses (weights.h, WeightView), and
// pairs stay within int16 (|x|, |w| <= 127). x quantizes to [-127, 127].
inline __m256i dot32(const XAbs& x, __m256i w) {
    const __m256i p16 = _mm256_maddubs_epi16(x.abs, _mm256_sign_epi8(w, x.x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// The int8 dot products with maddubs (linear_int8_block.h's policy).
struct Avx2Dot {
    using Vec = __m256i;
    using Sum = __m256i;
    using Acc = __m256;
    using XVec = XAbs;
    static constexpr int kChunk = 32;
    struct Group {};
    static Vec load(const int8_t* p) { return load32(p); }
    static XVec load_x(const int8_t* p) { return load_x_abs(p); }
    static void begin(Group&) {}
    static void step(Group&, const XVec&) {}
    static Sum zero() { return _mm256_setzero_si256(); }
    static Sum dot(Sum s, const XVec& x, Vec w) { return _mm256_add_epi32(s, dot32(x, w)); }
    static Acc acc_zero() { return _mm256_setzero_ps(); }
    static Acc fma(Acc acc, Sum s, const Group&, float scale) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc); }
};

// Decode (T == 1) of cache_resident weights (weights.h: the model fits the last-level cache)
// with groups of 64 (the converter's default) or 32 that divide K: linear_rows8_x86.h's 8-row
// kernel, each row's line 16 KiB ahead prefetched. On a 2-core AMD EPYC (AVX2 only; medians of
// interleaved rounds, docs/benchmarks.md) the lecture's full configuration decodes 1.10x to
// 1.43x as fast on one thread and 1.08x to 1.65x on two as with the 4-row kernel, while GPT-2
// 124M, read from DRAM, went 0.77x to 0.93x on two threads: hence the hint. Prefetching one
// block of 8 rows ahead (8 * K bytes) instead gave up most of the gain in cache.
struct Avx2Rows8 {
    using I = __m256i;
    using X = XAbs;
    static constexpr int kBytes = 32;
    static X load_x(const int8_t* p) { return load_x_abs(p); }
    static I start(const X*, int) { return _mm256_setzero_si256(); }
    static I dot(I s, const X& x, const int8_t* w) { return _mm256_add_epi32(s, dot32(x, load32(w))); }
    static __m256i fold(I s) { return s; }
};

}  // namespace
}  // namespace ember::kernels::linear_detail
