// The end of one group in the 8-row int8 decode kernels of linear_avx2.cpp and
// linear_avx512.cpp (i8_rows8_decode): each row's int32 sum over the group, folded into one
// vector and scaled into the 8 rows' f32 accumulators:
//   acc[r] += f32(sum_r) * ws[r * gpr] * xs,   r in [0, 8),
// s[r] the group's int32 lanes of row r (8 lanes, any split of its products), ws the group's
// scale of row 0 of the 8 (the rows' scales gpr floats apart), xs the group's scale of x.
// Included only by translation units built with AVX2 and FMA; internal linkage (an anonymous
// namespace), so that each keeps the copy compiled with its own flags.
#pragma once

#include <immintrin.h>

namespace ember::kernels::linear_detail {
namespace {

inline __m256 rows8_scale_group(const __m256i (&s)[8], const float* ws, int gpr, float xs, __m256 acc) {
    // vphaddd pairs neighbours: after two rounds lane j of each 128-bit half holds one row's
    // partial sum; the 128-bit swap adds the halves (lane r = row r).
    const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
    const __m256 scale = _mm256_mul_ps(
        _mm256_setr_ps(ws[0], ws[gpr], ws[2 * gpr], ws[3 * gpr], ws[4 * gpr], ws[5 * gpr], ws[6 * gpr], ws[7 * gpr]),
        _mm256_set1_ps(xs));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
}

}  // namespace
}  // namespace ember::kernels::linear_detail
