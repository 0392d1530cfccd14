// Small vector helpers for kernels compiled for the target only (lora.cpp; not ops themselves):
// the horizontal sum of an AVX register and an f32 dot product, with plain C++ where AVX2/FMA
// are not targeted. The ops chosen at run time have their own (ops_variants.h, linear_variants.h).
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define EMBER_AVX2 1
#endif

namespace ember::kernels::simd {

#ifdef EMBER_AVX2
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

// sum_k a[k] * b[k] over n floats.
inline float dot_f32(const float* a, const float* b, int n) {
    int k = 0;
    float acc = 0.0f;
#ifdef EMBER_AVX2
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (; k + 16 <= n; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
    }
    acc = hsum(_mm256_add_ps(s0, s1));
#endif
    for (; k < n; ++k) acc += a[k] * b[k];
    return acc;
}

}  // namespace ember::kernels::simd
