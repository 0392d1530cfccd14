#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/half.h"

#include "kernels/cpu/simd.h"

namespace ember::kernels {

size_t linear_scratch_xq_bytes(int T, int K) { return static_cast<size_t>(T) * K; }

size_t linear_scratch_xs_bytes(int T, int K, int group_size) {
    const int g = group_size > 0 ? (K + group_size - 1) / group_size : 1;
    return static_cast<size_t>(T) * g * sizeof(float);
}

void linear_ref(const float* x, int T, const WeightView& w, const float* bias, float* y) {
    std::vector<float> row(w.cols);
    for (int n = 0; n < w.rows; ++n) {
        dequantize_row(w, n, row.data());
        for (int t = 0; t < T; ++t) {
            const float* xt = x + static_cast<size_t>(t) * w.cols;
            double acc = bias ? bias[n] : 0.0;
            for (int k = 0; k < w.cols; ++k) acc += static_cast<double>(xt[k]) * row[k];
            y[static_cast<size_t>(t) * w.rows + n] = static_cast<float>(acc);
        }
    }
}

namespace {

using simd::dot_f32;
#ifdef EMBER_AVX2
using simd::hsum;
#endif

float dot_f16(const float* a, const uint16_t* b, int n) {
    int k = 0;
    float acc = 0.0f;
#ifdef EMBER_AVX2
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (; k + 16 <= n; k += 16) {
        const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k)));
        const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k + 8)));
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), b0, s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), b1, s1);
    }
    acc = hsum(_mm256_add_ps(s0, s1));
#endif
    for (; k < n; ++k) acc += a[k] * half_to_float(b[k]);
    return acc;
}

// Integer dot product of one int8 group of length len.
inline int32_t dot_i8_scalar(const int8_t* a, const int8_t* b, int len) {
    int32_t s = 0;
    for (int k = 0; k < len; ++k) s += static_cast<int32_t>(a[k]) * b[k];
    return s;
}

#ifdef EMBER_AVX2
// Integer dot of one 32-byte chunk of x with one of w, as 8 int32 partial sums.
inline __m256i dot32_i8(__m256i x, __m256i w) {
    // maddubs needs an unsigned operand: |w| times x with w's sign.
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

#endif

// sum over groups of (xq . wq)_g * xs[g] * ws[g] for one row of W and one row of x.
float dot_i8_groups(const int8_t* xq, const float* xs, const int8_t* wq, const float* ws, int K,
                    int group) {
    const int n_groups = (K + group - 1) / group;
    float acc = 0.0f;
#ifdef EMBER_AVX2
    if (group % 32 == 0) {
        __m256 vacc = _mm256_setzero_ps();
        for (int g = 0; g < n_groups; ++g) {
            const int begin = g * group;
            const int len = std::min(group, K - begin);
            const int8_t* a = xq + begin;
            const int8_t* b = wq + begin;
            __m256i isum = _mm256_setzero_si256();
            int k = 0;
            for (; k + 32 <= len; k += 32) {
                isum = _mm256_add_epi32(isum, dot32_i8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k)),
                                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k))));
            }
            const __m256 scale = _mm256_set1_ps(xs[g] * ws[g]);
            vacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, vacc);
            if (k < len) acc += static_cast<float>(dot_i8_scalar(a + k, b + k, len - k)) * xs[g] * ws[g];
        }
        return acc + hsum(vacc);
    }
#endif
    for (int g = 0; g < n_groups; ++g) {
        const int begin = g * group;
        const int len = std::min(group, K - begin);
        acc += static_cast<float>(dot_i8_scalar(xq + begin, wq + begin, len)) * xs[g] * ws[g];
    }
    return acc;
}

#ifdef EMBER_AVX2
// Four rows of W against one row of x at once: x loaded once per chunk, four independent
// accumulator chains. Requires group % 32 == 0 and K % group == 0 (no short groups).
void dot_i8_rows4(const int8_t* xq, const float* xs, const int8_t* const w[4], const float* const ws[4], int K, int group,
                  float out[4]) {
    const int n_groups = K / group;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    const int8_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    for (int g = 0; g < n_groups; ++g) {
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
        const int end = (g + 1) * group;
        for (int k = g * group; k < end; k += 32) {
            const __m256i vx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k));
            s0 = _mm256_add_epi32(s0, dot32_i8(vx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + k))));
            s1 = _mm256_add_epi32(s1, dot32_i8(vx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + k))));
            s2 = _mm256_add_epi32(s2, dot32_i8(vx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w2 + k))));
            s3 = _mm256_add_epi32(s3, dot32_i8(vx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w3 + k))));
        }
        const float sx = xs[g];
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(sx * ws[0][g]), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(sx * ws[1][g]), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2), _mm256_set1_ps(sx * ws[2][g]), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s3), _mm256_set1_ps(sx * ws[3][g]), acc3);
    }
    out[0] = hsum(acc0);
    out[1] = hsum(acc1);
    out[2] = hsum(acc2);
    out[3] = hsum(acc3);
}
#endif

// Symmetric int8 quantization of one row x [K] in groups: xs[g] = absmax / 127,
// q = round_half_even(x / xs[g]) (the AVX2 path converts with the default rounding mode,
// which is the same round-to-nearest-even as std::nearbyint).
void quantize_row_i8(const float* x, int K, int group, int8_t* xq, float* xs) {
    const int n_groups = (K + group - 1) / group;
    for (int g = 0; g < n_groups; ++g) {
        const int begin = g * group;
        const int end = std::min(K, begin + group);
        int k = begin;
        float amax = 0.0f;
#ifdef EMBER_AVX2
        const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        __m256 vmax = _mm256_setzero_ps();
        for (; k + 8 <= end; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        amax = _mm_cvtss_f32(m);
#endif
        for (; k < end; ++k) amax = std::max(amax, std::fabs(x[k]));
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        xs[g] = amax / 127.0f;
        k = begin;
#ifdef EMBER_AVX2
        const __m256 vinv = _mm256_set1_ps(inv);
        for (; k + 8 <= end; k += 8) {
            const __m256i i32 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vinv));
            const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(xq + k), _mm_packs_epi16(i16, i16));
        }
#endif
        for (; k < end; ++k) xq[k] = static_cast<int8_t>(std::nearbyint(x[k] * inv));
    }
}

constexpr int kRowGrain = 4;  // rows of W per unit of work: the int8 kernel takes four at a time

}  // namespace

void linear(const float* x, int T, const WeightView& w, const float* bias, float* y,
            const LinearScratch& scratch, ThreadPool& pool) {
    const int N = w.rows;
    const int K = w.cols;
    if (w.type == WType::I8) {
        const int gpr = w.groups_per_row();
        auto quantize = [&](int t0, int t1, int) {
            for (int t = t0; t < t1; ++t) {
                quantize_row_i8(x + static_cast<size_t>(t) * K, K, w.group_size, scratch.xq + static_cast<size_t>(t) * K,
                                scratch.xs + static_cast<size_t>(t) * gpr);
            }
        };
        if (T >= 8) {
            pool.parallel_for(T, 1, quantize);
        } else {
            quantize(0, T, 0);
        }
        const int8_t* wq = static_cast<const int8_t*>(w.data);
        pool.parallel_for(N, kRowGrain, [&](int n_begin, int n_end, int) {
            int n = n_begin;
#ifdef EMBER_AVX2
            if (w.group_size % 32 == 0 && K % w.group_size == 0) {
                for (; n + 4 <= n_end; n += 4) {
                    const int8_t* rows[4];
                    const float* scales[4];
                    for (int r = 0; r < 4; ++r) {
                        rows[r] = wq + static_cast<size_t>(n + r) * K;
                        scales[r] = w.scales + static_cast<size_t>(n + r) * gpr;
                    }
                    for (int t = 0; t < T; ++t) {
                        float out[4];
                        dot_i8_rows4(scratch.xq + static_cast<size_t>(t) * K, scratch.xs + static_cast<size_t>(t) * gpr, rows,
                                     scales, K, w.group_size, out);
                        float* yt = y + static_cast<size_t>(t) * N + n;
                        for (int r = 0; r < 4; ++r) yt[r] = out[r] + (bias ? bias[n + r] : 0.0f);
                    }
                }
            }
#endif
            for (; n < n_end; ++n) {
                const int8_t* wrow = wq + static_cast<size_t>(n) * K;
                const float* ws = w.scales + static_cast<size_t>(n) * gpr;
                const float b = bias ? bias[n] : 0.0f;
                for (int t = 0; t < T; ++t) {
                    y[static_cast<size_t>(t) * N + n] =
                        b + dot_i8_groups(scratch.xq + static_cast<size_t>(t) * K,
                                          scratch.xs + static_cast<size_t>(t) * gpr, wrow, ws, K, w.group_size);
                }
            }
        });
        return;
    }
    pool.parallel_for(N, kRowGrain, [&](int n_begin, int n_end, int) {
        for (int n = n_begin; n < n_end; ++n) {
            const float b = bias ? bias[n] : 0.0f;
            for (int t = 0; t < T; ++t) {
                const float* xt = x + static_cast<size_t>(t) * K;
                const float d = w.type == WType::F32
                                    ? dot_f32(xt, static_cast<const float*>(w.data) + static_cast<size_t>(n) * K, K)
                                    : dot_f16(xt, static_cast<const uint16_t*>(w.data) + static_cast<size_t>(n) * K, K);
                y[static_cast<size_t>(t) * N + n] = b + d;
            }
        }
    });
}

}  // namespace ember::kernels

namespace ember::kernels {

void linear_backward_input_ref(const float* dy, int T, const WeightView& w, float* dx, bool accumulate) {
    const int N = w.rows, K = w.cols;
    std::vector<float> row(K);
    std::vector<double> acc(static_cast<size_t>(T) * K, 0.0);
    for (int n = 0; n < N; ++n) {
        dequantize_row(w, n, row.data());
        for (int t = 0; t < T; ++t) {
            const double g = dy[static_cast<size_t>(t) * N + n];
            for (int k = 0; k < K; ++k) acc[static_cast<size_t>(t) * K + k] += g * row[k];
        }
    }
    for (size_t i = 0; i < acc.size(); ++i) dx[i] = static_cast<float>(acc[i] + (accumulate ? dx[i] : 0.0f));
}

namespace {
constexpr int kBackwardRows = 16;  // rows of dx per pass over W: one dequantized row serves 16
}

void linear_backward_input(const float* dy, int T, const WeightView& w, float* dx, bool accumulate, float* row_scratch,
                           ThreadPool& pool) {
    const int N = w.rows, K = w.cols;
    pool.parallel_for(T, kBackwardRows, [&](int t_begin, int t_end, int thread) {
        float* row = row_scratch + static_cast<size_t>(thread) * K;
        for (int t0 = t_begin; t0 < t_end; t0 += kBackwardRows) {
            const int t1 = std::min(t_end, t0 + kBackwardRows);
            if (!accumulate) std::fill(dx + static_cast<size_t>(t0) * K, dx + static_cast<size_t>(t1) * K, 0.0f);
            for (int n = 0; n < N; ++n) {
                const float* wr;
                if (w.type == WType::F32) {
                    wr = static_cast<const float*>(w.data) + static_cast<size_t>(n) * K;
                } else {
                    dequantize_row(w, n, row);
                    wr = row;
                }
                for (int t = t0; t < t1; ++t) {
                    const float g = dy[static_cast<size_t>(t) * N + n];
                    if (g == 0.0f) continue;
                    float* o = dx + static_cast<size_t>(t) * K;
                    for (int k = 0; k < K; ++k) o[k] += g * wr[k];
                }
            }
        }
    });
}

}  // namespace ember::kernels
