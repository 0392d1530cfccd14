#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_AVX2 1
#endif

namespace ember::kernels {

void attention_ref(const float* q, const float* k, const float* v, const AttentionShape& s, float* out) {
    const int C = s.n_head * s.head_size;
    std::vector<double> w(static_cast<size_t>(s.n_keys0 + s.T));
    for (int t = 0; t < s.T; ++t) {
        const int n_keys = s.n_keys0 + t;
        for (int h = 0; h < s.n_head; ++h) {
            const float* qh = q + static_cast<size_t>(t) * s.ldq + h * s.head_size;
            float* o = out + static_cast<size_t>(t) * C + h * s.head_size;
            if (n_keys == 0) {
                for (int d = 0; d < s.head_size; ++d) o[d] = 0.0f;
                continue;
            }
            double mx = -INFINITY;
            for (int j = 0; j < n_keys; ++j) {
                const float* kh = k + static_cast<size_t>(j) * C + h * s.head_size;
                double dot = 0.0;
                for (int d = 0; d < s.head_size; ++d) dot += static_cast<double>(qh[d]) * kh[d];
                w[j] = dot * s.scale;
                mx = std::max(mx, w[j]);
            }
            double sum = 0.0;
            for (int j = 0; j < n_keys; ++j) sum += (w[j] = std::exp(w[j] - mx));
            for (int d = 0; d < s.head_size; ++d) {
                double acc = 0.0;
                for (int j = 0; j < n_keys; ++j) acc += w[j] * v[static_cast<size_t>(j) * C + h * s.head_size + d];
                o[d] = static_cast<float>(acc / sum);
            }
        }
    }
}

namespace {

inline float dot(const float* a, const float* b, int n) {
    int d = 0;
    float acc = 0.0f;
#ifdef EMBER_AVX2
    __m256 s = _mm256_setzero_ps();
    for (; d + 8 <= n; d += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), s);
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    acc = _mm_cvtss_f32(r);
#endif
    for (; d < n; ++d) acc += a[d] * b[d];
    return acc;
}

// out[0:n] += a * x[0:n]
inline void axpy(float a, const float* x, float* out, int n) {
    int d = 0;
#ifdef EMBER_AVX2
    const __m256 va = _mm256_set1_ps(a);
    for (; d + 8 <= n; d += 8) {
        _mm256_storeu_ps(out + d, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + d), _mm256_loadu_ps(out + d)));
    }
#endif
    for (; d < n; ++d) out[d] += a * x[d];
}

}  // namespace

void attention(const float* q, const float* k, const float* v, const AttentionShape& s, float* out,
               float* scores, int scores_ld, ThreadPool& pool) {
    const int C = s.n_head * s.head_size;
    const int hs = s.head_size;
    pool.run(s.T * s.n_head, [&](int item, int thread) {
        const int t = item / s.n_head;
        const int h = item % s.n_head;
        const int n_keys = s.n_keys0 + t;
        const float* qh = q + static_cast<size_t>(t) * s.ldq + h * hs;
        float* o = out + static_cast<size_t>(t) * C + h * hs;
        std::fill(o, o + hs, 0.0f);
        if (n_keys == 0) return;
        float* w = scores + static_cast<size_t>(thread) * scores_ld;
        float mx = -INFINITY;
        for (int j = 0; j < n_keys; ++j) {
            w[j] = dot(qh, k + static_cast<size_t>(j) * C + h * hs, hs) * s.scale;
            mx = std::max(mx, w[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < n_keys; ++j) sum += (w[j] = std::exp(w[j] - mx));
        const float inv = 1.0f / sum;
        for (int j = 0; j < n_keys; ++j) axpy(w[j] * inv, v + static_cast<size_t>(j) * C + h * hs, o, hs);
    });
}

}  // namespace ember::kernels
