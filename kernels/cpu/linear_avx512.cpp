// linear()'s int8 kernels with AVX-512 VNNI (vpdpbusd on ZMM), and the f32 / f16 GEMMs of
// prefill on ZMM (AVX-512 F, below; compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni and AVX2's flags, run only where cpu_features.h finds
// them). Internal functions only, no std:: inline function (see linear_avx2.cpp).
//
// As in linear_avxvnni.cpp: sum_k w_k x_k = sum_k (w_k + 128) x_k - 128 sum_k x_k, W's bytes
// made unsigned by xor 0x80. A group's last chunk (short groups, K not a multiple of 64) is
// read with a byte mask: masked bytes load as 0 in x, so they add nothing to either sum.
#include <immintrin.h>

#include "kernels/cpu/linear_gemm_int8.h"
#include "kernels/cpu/linear_rows8_x86.h"
#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {

namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

// The 4-row kernel on ZMM (64 bytes a chunk) for groups of 64 or more, on YMM (32 bytes, the
// 256-bit EVEX forms that AVX-512 VL gives) for shorter groups, whose chunks would be half
// empty on ZMM; the 8-row decode kernel (below) on YMM.
struct Zmm {
    static constexpr int kBytes = 64;
    using I = __m512i;
    using F = __m512;
    using Mask = __mmask64;
    static Mask mask(int left) { return left >= 64 ? ~0ULL : (1ULL << left) - 1; }
    static I load(Mask m, const int8_t* p) { return _mm512_maskz_loadu_epi8(m, p); }
    static I zero() { return _mm512_setzero_si512(); }
    static I flip() { return _mm512_set1_epi8(static_cast<char>(0x80)); }
    static I xor_(I a, I b) { return _mm512_xor_si512(a, b); }
    static I dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
    static F fzero() { return _mm512_setzero_ps(); }
    static F fma(I d, I surplus, float scale, F acc) {
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d, surplus)), _mm512_set1_ps(scale), acc);
    }
    static __m256 fold(F v) {
        return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    }
};

struct Ymm {
    static constexpr int kBytes = 32;
    using I = __m256i;
    using F = __m256;
    using Mask = __mmask32;
    static Mask mask(int left) { return left >= 32 ? ~0U : (1U << left) - 1; }
    static I load(Mask m, const int8_t* p) { return _mm256_maskz_loadu_epi8(m, p); }
    static I zero() { return _mm256_setzero_si256(); }
    static I flip() { return _mm256_set1_epi8(static_cast<char>(0x80)); }
    static I xor_(I a, I b) { return _mm256_xor_si256(a, b); }
    static I dot(I acc, I u, I s) { return _mm256_dpbusd_epi32(acc, u, s); }
    static F fzero() { return _mm256_setzero_ps(); }
    static F fma(I d, I surplus, float scale, F acc) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d, surplus)), _mm256_set1_ps(scale), acc);
    }
    static __m256 fold(F v) { return v; }
    static I neg(I v) { return _mm256_sub_epi32(zero(), v); }
};

// y[0..R) = horizontal sums of acc[0..R) + bias (bias may be null).
template <int R>
void store_rows(const __m256* acc, const float* bias, float* y) {
    if constexpr (R == 4) {
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
        __m128 v = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias));
        _mm_storeu_ps(y, v);
    } else {
        for (int r = 0; r < R; ++r) {
            __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
            v = _mm_add_ps(v, _mm_movehl_ps(v, v));
            v = _mm_add_ss(v, _mm_movehdup_ps(v));
            y[r] = _mm_cvtss_f32(v) + (bias ? bias[r] : 0.0f);
        }
    }
}

// R rows of W (from row n) against every row of x: x loaded once per chunk for R rows.
template <class V, int R, bool kPrefetch>
void i8_block(const Args& a, int n) {
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    const typename V::I flip = V::flip();
    // Decode streams W once per token: kStreamAhead bytes ahead into L2 (linear_variants.h),
    // more lines in flight than the hardware prefetcher keeps.
    const size_t ahead = kStreamAhead;
    for (int t = 0; t < a.T; ++t) {
        const int8_t* x = a.xq + static_cast<size_t>(t) * K;
        const float* xs = a.xs + static_cast<size_t>(t) * gpr;
        typename V::F acc[R];
        for (int r = 0; r < R; ++r) acc[r] = V::fzero();
        for (int g = 0; g < gpr; ++g) {
            const int end = min_int(K, (g + 1) * group);
            typename V::I s[R];
            for (int r = 0; r < R; ++r) s[r] = V::zero();
            typename V::I surplus = V::zero();  // 128 * sum(x)
            for (int k = g * group; k < end; k += V::kBytes) {
                const typename V::Mask m = V::mask(end - k);
                const typename V::I vx = V::load(m, x + k);
                surplus = V::dot(surplus, flip, vx);
                for (int r = 0; r < R; ++r) {
                    const int8_t* wr = w + static_cast<size_t>(r) * K + k;
                    if (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr) + ahead, _MM_HINT_T1);  // never faults
                    s[r] = V::dot(s[r], V::xor_(V::load(m, wr), flip), vx);
                }
            }
            for (int r = 0; r < R; ++r) acc[r] = V::fma(s[r], surplus, xs[g] * ws[static_cast<size_t>(r) * gpr + g], acc[r]);
        }
        __m256 folded[R];
        for (int r = 0; r < R; ++r) folded[r] = V::fold(acc[r]);
        store_rows<R>(folded, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t) * a.N + n);
    }
}

template <class V, bool kPrefetch>
void i8_rows_block(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<V, 4, kPrefetch>(a, n);
    for (; n < n_end; ++n) i8_block<V, 1, kPrefetch>(a, n);
}

// Decode (T == 1) reads each row of W once: prefetched. Prefill re-reads a block for every
// row of x from L1, where a prefetch per chunk is only extra work.
template <class V>
void i8_rows(const Args& a, int n_begin, int n_end) {
    if (a.T == 1) {
        i8_rows_block<V, true>(a, n_begin, n_end);
    } else {
        i8_rows_block<V, false>(a, n_begin, n_end);
    }
}

// linear_gemm_int8.h's policy: 16 rows of x a ZMM, 2 ZMM a panel (32 rows), 4 rows of W a
// tile; W's words flipped to unsigned (xor 0x80 per byte), 128 * sum(x) subtracted per group.
struct GemmZmm {
    static constexpr int P = 16, NB = 2, R = 4, kUnit = 4;
    static constexpr bool kSurplus = true, kLanes = false;
    using VecI = __m512i;
    using VecF = __m512;
    static VecI load_x(const int8_t* p) { return _mm512_loadu_si512(p); }
    static VecI bcast_w(uint32_t w4) { return _mm512_set1_epi32(static_cast<int>(w4 ^ 0x80808080u)); }
    // vpdpbusd through asm with the accumulator tied ("+v"): with the intrinsic GCC 12 copies
    // each of the 8 accumulators to another register and back around every instruction.
    static VecI dot(VecI s, VecI x, VecI w) {
        __asm__("vpdpbusd %2, %1, %0" : "+v"(s) : "v"(w), "v"(x));
        return s;
    }
    static VecI izero() { return _mm512_setzero_si512(); }
    static VecF fzero() { return _mm512_setzero_ps(); }
    static VecF group_fma(VecF acc, VecI s, const int32_t* surplus, const float* xs, float ws) {
        const __m512 d = _mm512_cvtepi32_ps(_mm512_sub_epi32(s, _mm512_load_si512(surplus)));
        return _mm512_fmadd_ps(d, _mm512_mul_ps(_mm512_load_ps(xs), _mm512_set1_ps(ws)), acc);
    }
    static void store(float* out, VecF v) { _mm512_storeu_ps(out, v); }
};

// Decode (T == 1) of cache_resident weights (weights.h) with groups of 64 or 32 that divide K:
// linear_rows8_x86.h's 8-row kernel on VNNI, on YMM (the 256-bit EVEX forms; ZMM for groups of
// 64 ran 0.93x to 1.01x as fast on 2 threads, 0.91x to 1.09x on 1, in alternated pairs). Each
// row's sum starts at -128 * sum(x), so the xor-flipped W needs no correction after the group.
// On a 2-core Xeon with AVX-512 VNNI (alternated runs of the lecture's full configuration;
// docs/benchmarks.md) the kernel, then on ZMM (c9f0ec4), decoded 1.06x to 1.47x as fast on 1
// thread as the 4-row kernel did then, whose prefetch one block (4 * K bytes) ahead into L1 was
// too close for weights that come from L2 and L3 (it now prefetches kStreamAhead into L2), and
// 1.27x to 1.52x on 2 with 16 KiB ahead; 8 KiB ahead beat
// 4 KiB and 16 KiB, and 16 KiB 32 KiB.
constexpr size_t kDecodeAhead = 8192;

struct VnniRows8 {
    using V = Ymm;
    using I = V::I;
    static constexpr int kBytes = V::kBytes;
    static I load(const int8_t* p) { return V::load(V::mask(kBytes), p); }
    static I start(const I* x, int n) {
        I surplus = V::zero();
        for (int c = 0; c < n; ++c) surplus = V::dot(surplus, V::flip(), x[c]);
        return V::neg(surplus);
    }
    static I dot(I s, I x, const int8_t* w) { return V::dot(s, V::xor_(load(w), V::flip()), x); }
    static __m256i fold(I s) { return s; }
};

// The f32 and f16 GEMMs of prefill on ZMM: linear_avx2.cpp's tile (lanes over k, one sum per
// row of W and row of x, summed across lanes at the end) 16 lanes wide and 4 rows of W by 4 rows
// of x (16 accumulators; W's 4 loads serve 4 rows of x and x's 4 serve 4 rows of W). f16
// weights widened as they are loaded (vcvtph2ps); K's last partial 16 read with a mask, whose
// lanes load as 0, so there is no scalar tail. On the AVX-512 VNNI EPYC (2026-12-06, the
// lecture's full configuration, alternated with the AVX2 tile; docs/benchmarks.md) prefill ran
// 1.42x to 1.68x as fast in f32 and 1.49x to 2.05x in f16 on one thread.
inline __m512 load_w16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load_w16(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

// 4 rows of W x CC (1 to 4) rows of x, the accumulators named (gcc 12 keeps an array of 16
// ZMM accumulators on the stack and stores each one on every step of k).
template <typename W, int CC>
void f_tile4(const Args& a, int n, int t) {
    const int K = a.K;
    const W* w0 = static_cast<const W*>(a.w) + static_cast<size_t>(n) * K;
    const W *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
    const float* x0 = a.x + static_cast<size_t>(t) * K;
    const float* x1 = CC > 1 ? x0 + K : x0;
    const float* x2 = CC > 2 ? x0 + 2 * static_cast<size_t>(K) : x0;
    const float* x3 = CC > 3 ? x0 + 3 * static_cast<size_t>(K) : x0;
    __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
    for (int k = 0; k < K; k += 16) {
        const __mmask16 m = K - k >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (K - k)) - 1);
        const __m512 v0 = load_w16(w0 + k, m), v1 = load_w16(w1 + k, m), v2 = load_w16(w2 + k, m), v3 = load_w16(w3 + k, m);
        __m512 xv = _mm512_maskz_loadu_ps(m, x0 + k);
        a00 = _mm512_fmadd_ps(xv, v0, a00), a01 = _mm512_fmadd_ps(xv, v1, a01), a02 = _mm512_fmadd_ps(xv, v2, a02), a03 = _mm512_fmadd_ps(xv, v3, a03);
        if (CC > 1) {
            xv = _mm512_maskz_loadu_ps(m, x1 + k);
            a10 = _mm512_fmadd_ps(xv, v0, a10), a11 = _mm512_fmadd_ps(xv, v1, a11), a12 = _mm512_fmadd_ps(xv, v2, a12), a13 = _mm512_fmadd_ps(xv, v3, a13);
        }
        if (CC > 2) {
            xv = _mm512_maskz_loadu_ps(m, x2 + k);
            a20 = _mm512_fmadd_ps(xv, v0, a20), a21 = _mm512_fmadd_ps(xv, v1, a21), a22 = _mm512_fmadd_ps(xv, v2, a22), a23 = _mm512_fmadd_ps(xv, v3, a23);
        }
        if (CC > 3) {
            xv = _mm512_maskz_loadu_ps(m, x3 + k);
            a30 = _mm512_fmadd_ps(xv, v0, a30), a31 = _mm512_fmadd_ps(xv, v1, a31), a32 = _mm512_fmadd_ps(xv, v2, a32), a33 = _mm512_fmadd_ps(xv, v3, a33);
        }
    }
    const float* bias = a.bias ? a.bias + n : nullptr;
    auto store = [&](int c, __m512 s0, __m512 s1, __m512 s2, __m512 s3) {
        float* y = a.y + static_cast<size_t>(t + c) * a.N + n;
        y[0] = _mm512_reduce_add_ps(s0) + (bias ? bias[0] : 0.0f);
        y[1] = _mm512_reduce_add_ps(s1) + (bias ? bias[1] : 0.0f);
        y[2] = _mm512_reduce_add_ps(s2) + (bias ? bias[2] : 0.0f);
        y[3] = _mm512_reduce_add_ps(s3) + (bias ? bias[3] : 0.0f);
    };
    store(0, a00, a01, a02, a03);
    if (CC > 1) store(1, a10, a11, a12, a13);
    if (CC > 2) store(2, a20, a21, a22, a23);
    if (CC > 3) store(3, a30, a31, a32, a33);
}

// One row of W (N's last rows past a multiple of 4) x one row of x.
template <typename W>
void f_tile1(const Args& a, int n, int t) {
    const int K = a.K;
    const W* w = static_cast<const W*>(a.w) + static_cast<size_t>(n) * K;
    const float* x = a.x + static_cast<size_t>(t) * K;
    __m512 acc = _mm512_setzero_ps();
    for (int k = 0; k < K; k += 16) {
        const __mmask16 m = K - k >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (K - k)) - 1);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + k), load_w16(w + k, m), acc);
    }
    a.y[static_cast<size_t>(t) * a.N + n] = _mm512_reduce_add_ps(acc) + (a.bias ? a.bias[n] : 0.0f);
}

template <typename W>
void f_gemm(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) {
        int t = t_begin;
        for (; t + 4 <= t_end; t += 4) f_tile4<W, 4>(a, n, t);
        switch (t_end - t) {
            case 3: f_tile4<W, 3>(a, n, t); break;
            case 2: f_tile4<W, 2>(a, n, t); break;
            case 1: f_tile4<W, 1>(a, n, t); break;
            default: break;
        }
    }
    for (; n < n_end; ++n)
        for (int t = t_begin; t < t_end; ++t) f_tile1<W>(a, n, t);
}

}  // namespace

void f32_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end) { f_gemm<float>(a, t_begin, t_end, n_begin, n_end); }

void f16_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<uint16_t>(a, t_begin, t_end, n_begin, n_end);
}

void i8_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    i8_gemm<GemmZmm>(a, t_begin, t_end, n_begin, n_end, i8_rows_avx512);
}

void i8_rows_avx512(const Args& a, int n_begin, int n_end) {
    auto four_rows = [](const Args& b, int begin, int end) {
        if (b.group >= 64) return i8_rows<Zmm>(b, begin, end);
        i8_rows<Ymm>(b, begin, end);
    };
    if (takes_rows8_decode(a.cache_resident, a.T, a.K, a.group)) return rows8<VnniRows8, kDecodeAhead>(a, n_begin, n_end, four_rows);
    four_rows(a, n_begin, n_end);
}

}  // namespace ember::kernels::linear_detail
