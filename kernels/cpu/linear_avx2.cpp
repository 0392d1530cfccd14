// linear()'s AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; run only where
// cpu_features.h finds them). Internal functions only, and no std:: inline function: a
// non-inlined copy compiled with these flags could be linked into plain code.
#include <immintrin.h>

#include "kernels/cpu/linear_gemm_int8.h"
#include "kernels/cpu/linear_int8_block.h"

namespace ember::kernels::linear_detail {

namespace {

// 32 int8 products of x and w summed into 8 int32: maddubs takes an unsigned operand, so
// |w| times x with w's sign (pairs stay within int16: |x| <= 127, |w| <= 128).
inline __m256i dot32(__m256i x, __m256i w) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

float dot_f32(const float* a, const float* b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 32 <= n; k += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), s3);
    }
    for (; k + 8 <= n; k += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
    float acc = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; k < n; ++k) acc += a[k] * b[k];
    return acc;
}

inline __m256 load_f16x8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

float dot_f16(const float* a, const uint16_t* b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 32 <= n; k += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), load_f16x8(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), load_f16x8(b + k + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), load_f16x8(b + k + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), load_f16x8(b + k + 24), s3);
    }
    for (; k + 8 <= n; k += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), load_f16x8(b + k), s0);
    float acc = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; k < n; ++k) acc += a[k] * _cvtsh_ss(b[k]);
    return acc;
}

// The int8 dot products with maddubs (linear_int8_block.h's policy).
struct Avx2Dot {
    using Vec = __m256i;
    using Sum = __m256i;
    using Acc = __m256;
    static constexpr int kChunk = 32;
    struct Group {};
    static Vec load(const int8_t* p) { return load32(p); }
    static void begin(Group&) {}
    static void step(Group&, Vec) {}
    static Sum zero() { return _mm256_setzero_si256(); }
    static Sum dot(Sum s, Vec x, Vec w) { return _mm256_add_epi32(s, dot32(x, w)); }
    static Acc acc_zero() { return _mm256_setzero_ps(); }
    static Acc fma(Acc acc, Sum s, const Group&, float scale) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc); }
};

// linear_gemm_int8.h's policy: 8 rows of x a YMM, 2 YMM a panel (16 rows), 2 rows of W a tile
// (16 registers in all); each lane's 4 products by maddubs on |w| and x with w's sign.
struct GemmAvx2 {
    static constexpr int P = 8, NB = 2, R = 2, kUnit = 4;
    static constexpr bool kSurplus = false;
    using VecI = __m256i;
    using VecF = __m256;
    static VecI load_x(const int8_t* p) { return load32(p); }
    static VecI bcast_w(uint32_t w4) { return _mm256_set1_epi32(static_cast<int>(w4)); }
    static VecI dot(VecI s, VecI x, VecI w) { return _mm256_add_epi32(s, dot32(x, w)); }
    static VecI izero() { return _mm256_setzero_si256(); }
    static VecF fzero() { return _mm256_setzero_ps(); }
    static VecF group_fma(VecF acc, VecI s, const int32_t*, const float* xs, float ws) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(_mm256_load_ps(xs), _mm256_set1_ps(ws)), acc);
    }
    static void store(float* out, VecF v) { _mm256_storeu_ps(out, v); }
};

// The f32 GEMM's tile: RR rows of W (from n) x CC rows of x (from t), lanes over k, RR * CC
// accumulators (8 for 4 x 2: W's 4 loads serve 2 rows of x, x's 2 serve 4 rows of W); f16
// weights widened as they are loaded (vcvtph2ps); the part of K past the last 8 scalar.
inline __m256 load_w8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_w8(const uint16_t* p) { return load_f16x8(p); }
inline float w_at(const float* p) { return *p; }
inline float w_at(const uint16_t* p) { return _cvtsh_ss(*p); }

template <typename W, int RR, int CC>
void f_tile(const Args& a, int n, int t) {
    const int K = a.K;
    const W* w = static_cast<const W*>(a.w) + static_cast<size_t>(n) * K;
    const float* x = a.x + static_cast<size_t>(t) * K;
    __m256 acc[CC][RR];
    for (int c = 0; c < CC; ++c)
        for (int r = 0; r < RR; ++r) acc[c][r] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[RR];
        for (int r = 0; r < RR; ++r) wv[r] = load_w8(w + static_cast<size_t>(r) * K + k);
        for (int c = 0; c < CC; ++c) {
            const __m256 xv = _mm256_loadu_ps(x + static_cast<size_t>(c) * K + k);
            for (int r = 0; r < RR; ++r) acc[c][r] = _mm256_fmadd_ps(xv, wv[r], acc[c][r]);
        }
    }
    for (int c = 0; c < CC; ++c) {
        float tail[RR];
        for (int r = 0; r < RR; ++r) {
            float s = 0.0f;
            for (int i = k; i < K; ++i) s += x[static_cast<size_t>(c) * K + i] * w_at(w + static_cast<size_t>(r) * K + i);
            tail[r] = s;
        }
        store_rows<RR>(acc[c], tail, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t + c) * a.N + n);
    }
}

template <typename W>
void f_gemm(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) {
        int t = t_begin;
        for (; t + 2 <= t_end; t += 2) f_tile<W, 4, 2>(a, n, t);
        if (t < t_end) f_tile<W, 4, 1>(a, n, t);
    }
    for (; n < n_end; ++n) {
        int t = t_begin;
        for (; t + 2 <= t_end; t += 2) f_tile<W, 1, 2>(a, n, t);
        if (t < t_end) f_tile<W, 1, 1>(a, n, t);
    }
}

}  // namespace

void f32_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end) { f_gemm<float>(a, t_begin, t_end, n_begin, n_end); }

void f16_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<uint16_t>(a, t_begin, t_end, n_begin, n_end);
}

void i8_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    i8_gemm<GemmAvx2>(a, t_begin, t_end, n_begin, n_end, i8_rows_avx2);
}

void f32_rows_avx2(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const float* w = static_cast<const float*>(a.w) + static_cast<size_t>(n) * a.K;
        const float b = a.bias ? a.bias[n] : 0.0f;
        for (int t = 0; t < a.T; ++t) a.y[static_cast<size_t>(t) * a.N + n] = b + dot_f32(a.x + static_cast<size_t>(t) * a.K, w, a.K);
    }
}

void f16_rows_avx2(const Args& a, int n_begin, int n_end) {
    for (int n = n_begin; n < n_end; ++n) {
        const uint16_t* w = static_cast<const uint16_t*>(a.w) + static_cast<size_t>(n) * a.K;
        const float b = a.bias ? a.bias[n] : 0.0f;
        for (int t = 0; t < a.T; ++t) a.y[static_cast<size_t>(t) * a.N + n] = b + dot_f16(a.x + static_cast<size_t>(t) * a.K, w, a.K);
    }
}

// Decode (T == 1) of cache_resident weights (weights.h: the model fits the last-level cache)
// with groups of 64 (the converter's default) or 32 that divide K: 8 rows of W at a time, each
// group's 8 rows in straight-line code (no loop state to keep in registers). The group's eight
// int32 sums fold into one vector (lane r = row n + r) with hadd and a 128-bit swap, so its
// scales cost one convert and one FMA for 8 rows instead of 4 per row. Each row's line
// kDecodeAhead bytes on is prefetched once per group: 8 streams that jump every 8 * K bytes are
// more than the hardware prefetchers follow. On a 2-core AMD EPYC (AVX2 only; medians of
// interleaved rounds, docs/benchmarks.md) the lecture's full configuration decodes 1.10x to
// 1.43x as fast on one thread and 1.08x to 1.65x on two as with the 4-row kernel, while GPT-2
// 124M, read from DRAM, went 0.77x to 0.93x on two threads: hence the hint. Prefetching one
// block of 8 rows ahead (8 * K bytes) instead gave up most of the gain in cache.
constexpr size_t kDecodeAhead = 16384;

template <int kChunks>
void i8_rows8_decode(const Args& a, int n) {
    const int K = a.K, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    __m256 acc = _mm256_setzero_ps();
    for (int g = 0; g < gpr; ++g) {
        const int k = g * 32 * kChunks;
        const __m256i x0 = load32(a.xq + k);
        __m256i x1;
        if constexpr (kChunks == 2) x1 = load32(a.xq + k + 32);
        __m256i s[8];
        for (int r = 0; r < 8; ++r) {
            const int8_t* wr = w + static_cast<size_t>(r) * K + k;
            __builtin_prefetch(wr + kDecodeAhead);
            s[r] = dot32(x0, load32(wr));
            if constexpr (kChunks == 2) s[r] = _mm256_add_epi32(s[r], dot32(x1, load32(wr + 32)));
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

void i8_rows_avx2(const Args& a, int n_begin, int n_end) {
    if (!avx2_rows8_decode(a.cache_resident, a.T, a.K, a.group)) return i8_rows<Avx2Dot>(a, n_begin, n_end);
    int n = n_begin;
    for (; n + 8 <= n_end; n += 8) a.group == 64 ? i8_rows8_decode<2>(a, n) : i8_rows8_decode<1>(a, n);
    if (n < n_end) i8_rows<Avx2Dot>(a, n, n_end);
}

// The default rounding mode of _mm256_cvtps_epi32 and of __builtin_nearbyintf is the same
// round-to-nearest-even, so every variant quantizes x to the same integers.
void quantize_avx2(const float* x, int K, int group, int8_t* xq, float* xs) {
    const int n_groups = (K + group - 1) / group;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int g = 0; g < n_groups; ++g) {
        const int begin = g * group;
        const int end = min_int(K, begin + group);
        int k = begin;
        __m256 vmax = _mm256_setzero_ps();
        for (; k + 8 <= end; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float amax = _mm_cvtss_f32(m);
        for (; k < end; ++k) {
            const float v = __builtin_fabsf(x[k]);
            amax = v > amax ? v : amax;
        }
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        xs[g] = amax / 127.0f;
        const __m256 vinv = _mm256_set1_ps(inv);
        for (k = begin; k + 8 <= end; k += 8) {
            const __m256i i32 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vinv));
            const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(xq + k), _mm_packs_epi16(i16, i16));
        }
        for (; k < end; ++k) xq[k] = static_cast<int8_t>(__builtin_nearbyintf(x[k] * inv));
    }
}

}  // namespace ember::kernels::linear_detail
