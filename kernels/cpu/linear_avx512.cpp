// linear()'s int8 kernels with AVX-512 VNNI (vpdpbusd on ZMM), and the f32 / f16 GEMMs of
// prefill on ZMM (AVX-512 F, linear_gemm_f32.h; compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni and AVX2's flags, run only where cpu_features.h finds
// them). Internal functions only, no std:: inline function (see linear_avx2.cpp).
//
// As in linear_avxvnni.cpp: sum_k w_k x_k = sum_k (w_k + 128) x_k - 128 sum_k x_k, W's bytes
// made unsigned by xor 0x80. A group's last chunk (short groups, K not a multiple of 64) is
// read with a byte mask: masked bytes load as 0 in x, so they add nothing to either sum. A full
// chunk is a plain load: with the mask on every chunk the 4-row kernel read 0.83x to 0.90x as
// fast from L1 and L2 on the AVX-512 VNNI EPYC (bench/int8_decode_rate.cpp, docs/benchmarks.md).
#include <immintrin.h>

#include "kernels/cpu/linear_gemm_f32.h"
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
    static I load(Mask m, const int8_t* p) { return m == ~0ULL ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(m, p); }
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
    static I load(Mask m, const int8_t* p) {
        return m == ~0U ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi8(m, p);
    }
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
    using X = I;
    static X load_x(const int8_t* p) { return load(p); }
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

// The f32 and f16 GEMMs of prefill on ZMM (linear_gemm_f32.h): 16 rows of x a vector, 2 a
// panel (32 rows), 8 rows of W a tile (16 accumulators). On the AVX-512 VNNI EPYC (2026-12-06,
// docs/benchmarks.md) this ran the lecture's full configuration's prefill ... as fast as the
// tile before it (lanes over k, 4 rows of W x 4 rows of x, a horizontal sum per output).
struct GemmF32Zmm {
    static constexpr int P = 16, NB = 2, R = 8;
    using VecF = __m512;
    static VecF zero() { return _mm512_setzero_ps(); }
    static VecF load(const float* p) { return _mm512_load_ps(p); }
    static VecF bcast(const float* p) { return _mm512_set1_ps(*p); }
    static VecF fma(VecF a, VecF b, VecF c) { return _mm512_fmadd_ps(a, b, c); }
    static void store(float* out, VecF v) { _mm512_store_ps(out, v); }
    static void widen(const uint16_t* src, float* dst, int n) {
        int k = 0;
        for (; k + 16 <= n; k += 16) _mm512_storeu_ps(dst + k, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k))));
        if (k < n) {
            const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1);
            _mm512_mask_storeu_ps(dst + k, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + k)));
        }
    }
};
static_assert(GemmF32Zmm::R <= kFGemmMaxR && kFGemmRows % (GemmF32Zmm::P * GemmF32Zmm::NB) == 0, "linear_variants.h sizes the scratch");

}  // namespace

void f32_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<GemmF32Zmm, float>(a, t_begin, t_end, n_begin, n_end, a.xf);
}

void f16_gemm_avx512(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<GemmF32Zmm, uint16_t>(a, t_begin, t_end, n_begin, n_end, a.xf);
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
