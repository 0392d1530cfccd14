#include "kernels/cpu/lora.h"

#include <cstddef>
#include <vector>

#include "kernels/cpu/simd.h"

namespace ember::kernels {

void lora_forward_ref(const float* x, const float* A, const float* B, const LoraShape& s, float* u, float* y) {
    for (int t = 0; t < s.T; ++t) {
        for (int i = 0; i < s.r; ++i) {
            double acc = 0.0;
            for (int k = 0; k < s.K; ++k) acc += static_cast<double>(x[static_cast<size_t>(t) * s.K + k]) * A[static_cast<size_t>(i) * s.K + k];
            u[static_cast<size_t>(t) * s.r + i] = static_cast<float>(acc);
        }
        for (int n = 0; n < s.N; ++n) {
            double acc = 0.0;
            for (int i = 0; i < s.r; ++i) acc += static_cast<double>(u[static_cast<size_t>(t) * s.r + i]) * B[static_cast<size_t>(n) * s.r + i];
            y[static_cast<size_t>(t) * s.N + n] += static_cast<float>(s.scale * acc);
        }
    }
}

namespace {

// u . b over the rank (a short vector): one AVX register per 8 values, no 16-wide main loop.
inline float dot_rank(const float* u, const float* b, int r) {
    int i = 0;
    float acc = 0.0f;
#ifdef EMBER_AVX2
    if (r >= 8) {
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(u), _mm256_loadu_ps(b));
        for (i = 8; i + 8 <= r; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(u + i), _mm256_loadu_ps(b + i), a);
        acc = simd::hsum(a);
    }
#endif
    for (; i < r; ++i) acc += u[i] * b[i];
    return acc;
}

}  // namespace

void lora_forward(const float* x, const float* A, const float* B, const LoraShape& s, float* u, float* y, ThreadPool& pool) {
    pool.parallel_for(s.T, 4, [&](int t0, int t1, int) {
        for (int t = t0; t < t1; ++t) {
            const float* xt = x + static_cast<size_t>(t) * s.K;
            float* ut = u + static_cast<size_t>(t) * s.r;
            for (int i = 0; i < s.r; ++i) ut[i] = simd::dot_f32(xt, A + static_cast<size_t>(i) * s.K, s.K);
            float* yt = y + static_cast<size_t>(t) * s.N;
            for (int n = 0; n < s.N; ++n) yt[n] += s.scale * dot_rank(ut, B + static_cast<size_t>(n) * s.r, s.r);
        }
    });
}

void lora_backward_ref(const float* x, const float* u, const float* dy, const float* A, const float* B, const LoraShape& s,
                       float* dA, float* dB, float* du, float* dx) {
    const size_t T = s.T, K = s.K, N = s.N, r = s.r;
    for (size_t n = 0; n < N; ++n) {
        for (size_t i = 0; i < r; ++i) {
            double acc = 0.0;
            for (size_t t = 0; t < T; ++t) acc += static_cast<double>(dy[t * N + n]) * u[t * r + i];
            dB[n * r + i] += static_cast<float>(s.scale * acc);
        }
    }
    for (size_t t = 0; t < T; ++t) {
        for (size_t i = 0; i < r; ++i) {
            double acc = 0.0;
            for (size_t n = 0; n < N; ++n) acc += static_cast<double>(dy[t * N + n]) * B[n * r + i];
            du[t * r + i] = static_cast<float>(s.scale * acc);
        }
    }
    for (size_t i = 0; i < r; ++i) {
        for (size_t k = 0; k < K; ++k) {
            double acc = 0.0;
            for (size_t t = 0; t < T; ++t) acc += static_cast<double>(du[t * r + i]) * x[t * K + k];
            dA[i * K + k] += static_cast<float>(acc);
        }
    }
    if (!dx) return;
    for (size_t t = 0; t < T; ++t) {
        for (size_t k = 0; k < K; ++k) {
            double acc = 0.0;
            for (size_t i = 0; i < r; ++i) acc += static_cast<double>(du[t * r + i]) * A[i * K + k];
            dx[t * K + k] += static_cast<float>(acc);
        }
    }
}

void lora_backward(const float* x, const float* u, const float* dy, const float* A, const float* B, const LoraShape& s,
                   float* dA, float* dB, float* du, float* dx, ThreadPool& pool) {
    const size_t K = s.K, N = s.N, r = s.r;
    // du = scale * dy @ B, and dx += du @ A: rows of T independent.
    pool.parallel_for(s.T, 4, [&](int t0, int t1, int) {
        for (int t = t0; t < t1; ++t) {
            const float* g = dy + t * N;
            float* d = du + t * r;
            for (size_t i = 0; i < r; ++i) d[i] = 0.0f;
            for (size_t n = 0; n < N; ++n) {
                const float gn = g[n];
                const float* b = B + n * r;
                for (size_t i = 0; i < r; ++i) d[i] += gn * b[i];
            }
            for (size_t i = 0; i < r; ++i) d[i] *= s.scale;
            if (dx) {
                float* o = dx + t * K;
                for (size_t i = 0; i < r; ++i) {
                    const float di = d[i];
                    const float* a = A + i * K;
                    for (size_t k = 0; k < K; ++k) o[k] += di * a[k];
                }
            }
        }
    });
    // dB [N, r] += scale * dy^T u: rows n independent.
    pool.parallel_for(s.N, 8, [&](int n0, int n1, int) {
        for (int t = 0; t < s.T; ++t) {
            const float* g = dy + t * N;
            const float* ut = u + t * r;
            for (int n = n0; n < n1; ++n) {
                const float gn = s.scale * g[n];
                float* b = dB + n * r;
                for (size_t i = 0; i < r; ++i) b[i] += gn * ut[i];
            }
        }
    });
    // dA [r, K] += du^T x: columns k independent.
    pool.parallel_for(s.K, 16, [&](int k0, int k1, int) {
        for (int t = 0; t < s.T; ++t) {
            const float* xt = x + t * K;
            const float* d = du + t * r;
            for (size_t i = 0; i < r; ++i) {
                const float di = d[i];
                float* a = dA + i * K;
                for (int k = k0; k < k1; ++k) a[k] += di * xt[k];
            }
        }
    });
}

}  // namespace ember::kernels
