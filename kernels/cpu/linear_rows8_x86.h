// The 8-row int8 decode kernel of linear()'s x86 row kernels (linear_avx2.cpp,
// linear_avxvnni.cpp, linear_avx512.cpp): decode (T == 1) of cache_resident weights
// (weights.h) with groups of 64 or 32 that divide K (takes_rows8_decode, linear_variants.h).
// Same math as linear_int8_block.h:
//   y[n + r] = sum_g (xq . wq_{n+r})_g * xs[g] * ws[n + r, g] + bias[n + r],   r in [0, 8),
// 8 rows of W a group at a time in straight-line code (no loop state to keep in registers).
// The group's eight int32 sums fold into one vector (lane r = row n + r) with vphaddd and a
// 128-bit swap, so its scales cost one convert and one FMA for 8 rows instead of 4 per row.
// Each row's line kAhead bytes on is prefetched once per group: 8 streams that jump every
// 8 * K bytes are more than the hardware prefetchers follow, and one block ahead (8 * K bytes)
// is too close for weights that come from L2 and L3 (docs/benchmarks.md).
//
// The ISA comes in as a policy D with:
//   I                                    a vector of int8 (loads) or int32 (sums) lanes
//   X                                    kBytes of x as dot() takes them, made once for the
//                                        8 rows (I, or AVX2's x with |x|)
//   kBytes                               bytes of x or W per vector (32 in every level's policy)
//   X load_x(const int8_t* p)            kBytes bytes of x
//   I start(const X* x, int n)           a row's sum before the group's n chunks x[0..n):
//                                        zero, or -128 * sum(x) where dot() gives (w + 128) . x
//   I dot(I s, const X& x, const int8_t* w)  s plus the products of kBytes of x and of W at w
//   __m256i fold(I s)                    8 int32 lanes holding the total of s's lanes (the
//                                        identity for 256-bit I)
// Included only by translation units built with AVX2 and FMA; internal linkage (an anonymous
// namespace), so that each keeps the copy compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {
namespace {

// Rows n..n+7 of y, for a.group == kChunks * D::kBytes (rows8() below makes sure).
template <class D, int kChunks, size_t kAhead>
void rows8_decode(const Args& a, int n) {
    const int K = a.K, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    __m256 acc = _mm256_setzero_ps();
    for (int g = 0; g < gpr; ++g) {
        const int k = g * D::kBytes * kChunks;
        typename D::X x[kChunks];
        for (int c = 0; c < kChunks; ++c) x[c] = D::load_x(a.xq + k + c * D::kBytes);
        const typename D::I start = D::start(x, kChunks);
        __m256i s[8];
        for (int r = 0; r < 8; ++r) {
            const int8_t* wr = w + static_cast<size_t>(r) * K + k;
            __builtin_prefetch(wr + kAhead);  // a hint: never faults, past W's end included
            typename D::I sum = D::dot(start, x[0], wr);
            if constexpr (kChunks == 2) sum = D::dot(sum, x[1], wr + D::kBytes);
            s[r] = D::fold(sum);
        }
        const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
        const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
        const float* wg = ws + g;
        const __m256 scale = _mm256_mul_ps(_mm256_setr_ps(wg[0], wg[gpr], wg[2 * gpr], wg[3 * gpr], wg[4 * gpr], wg[5 * gpr],
                                                          wg[6 * gpr], wg[7 * gpr]),
                                           _mm256_set1_ps(a.xs[g]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
    }
    if (a.bias) acc = _mm256_add_ps(acc, _mm256_loadu_ps(a.bias + n));
    _mm256_storeu_ps(a.y + n, acc);
}

// Rows [n_begin, n_end): 8 at a time for groups of 64 (two chunks) or 32 (one); rows past the
// last multiple of 8, and every row for another group size, by `rest` (the level's 4-row kernel).
template <class D, size_t kAhead, class Rest>
void rows8(const Args& a, int n_begin, int n_end, Rest rest) {
    static_assert(D::kBytes == 32, "the group sizes below are one and two chunks of 32 bytes");
    int n = n_begin;
    if (a.group == 64) {
        for (; n + 8 <= n_end; n += 8) rows8_decode<D, 2, kAhead>(a, n);
    } else if (a.group == 32) {
        for (; n + 8 <= n_end; n += 8) rows8_decode<D, 1, kAhead>(a, n);
    }
    if (n < n_end) rest(a, n, n_end);
}

}  // namespace
}  // namespace ember::kernels::linear_detail
