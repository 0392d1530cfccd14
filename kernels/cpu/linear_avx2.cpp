// linear()'s AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; run only where
// cpu_features.h finds them). Internal functions only, and no std:: inline function: a
// non-inlined copy compiled with these flags could be linked into plain code.
#include <immintrin.h>

#include "kernels/cpu/linear_avx2_dot.h"
#include "kernels/cpu/linear_gemm_f32.h"
#include "kernels/cpu/linear_gemm_int8.h"
#include "kernels/cpu/linear_int8_block.h"
#include "kernels/cpu/linear_rows8_x86.h"

namespace ember::kernels::linear_detail {

namespace {

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

// The f32 and f16 GEMMs of prefill on YMM (linear_gemm_f32.h): 8 rows of x a vector, 2 a
// panel (16 rows), 6 rows of W a tile: 12 accumulators, 2 x vectors and a broadcast in the 16
// registers. On the AVX-512 VNNI EPYC (2026-12-06, the AVX2 level forced; docs/benchmarks.md)
// ... as fast as the tile before it (lanes over k, 4 rows of W x 2 of x, a horizontal
// sum per output).
struct GemmF32Ymm {
    static constexpr int P = 8, NB = 2, R = 6;
    using VecF = __m256;
    static VecF zero() { return _mm256_setzero_ps(); }
    static VecF load(const float* p) { return _mm256_load_ps(p); }
    static VecF bcast(const float* p) { return _mm256_broadcast_ss(p); }
    static VecF fma(VecF a, VecF b, VecF c) { return _mm256_fmadd_ps(a, b, c); }
    static void store(float* out, VecF v) { _mm256_store_ps(out, v); }
    static void widen(const uint16_t* src, float* dst, int n) {
        int k = 0;
        for (; k + 8 <= n; k += 8) _mm256_storeu_ps(dst + k, load_f16x8(src + k));
        for (; k < n; ++k) dst[k] = _cvtsh_ss(src[k]);
    }
};
static_assert(GemmF32Ymm::R <= kFGemmMaxR && kFGemmRows % (GemmF32Ymm::P * GemmF32Ymm::NB) == 0, "linear_variants.h sizes the scratch");

// The int8 GEMM of prefill (T >= 8), in int16. Without VNNI, vpmaddubsw needs |w| and x with
// w's sign: three instructions on the two multiply pipes per 32 products. vpmaddwd on int16 pairs
// gives 16 exact products per instruction with nothing around it but the add. So:
//   - x is packed once per K block as int16 pairs, in panels of 16 rows: [unit][16 rows][2]
//     (unit u of a group holds its k = 2u, 2u + 1; an odd group's last pair ends in 0);
//   - a task (kW16Rows = 64 rows of x, i8_gemm_rows) holds four such panels, and each tile of 4
//     rows of W is widened to int16 pairs for the block once for all four, into a buffer from
//     which each pair is broadcast by a load;
//   - per pair of k, 4 rows of W x 16 rows of x: 4 broadcasts, 2 loads of x, 8 vpmaddwd, 8 adds.
// Same integers as the plain kernel (every product and sum exact in int32, -128 in W included);
// the f32 work per group as in linear_gemm_int8.h.
constexpr int kW16Panel = 16;                          // rows of x per panel: two YMM of 8 rows
constexpr int kW16Panels = 4;                          // panels per task
constexpr int kW16Rows = kW16Panel * kW16Panels;       // rows of x per task (i8_gemm_rows)
constexpr int kW16BlockUnits = 256;                    // pairs of k per K block: 16 KiB a panel
constexpr int kW16BlockGroups = 64;                    // groups per K block at most
constexpr size_t kW16PanelInts = static_cast<size_t>(kW16BlockUnits) * kW16Panel * 2;

struct W16Panels {
    alignas(32) int16_t x[kW16Panels * kW16PanelInts];         // [panel][unit][row][2]
    alignas(32) float xs[kW16Panels][kW16BlockGroups * kW16Panel];  // [panel][group of the block][row]
    int unit0[kW16BlockGroups + 1];                            // first unit of each group of the block
    int panels = 0;                                            // panels holding rows of x
};

// The end of the K block that starts at group g0: whole groups, at most kW16BlockUnits pairs
// and kW16BlockGroups groups (the caller made sure one group fits).
int w16_block_end(const Args& a, int g0) {
    int g1 = g0, units = 0;
    while (g1 < a.gpr && g1 - g0 < kW16BlockGroups) {
        const int u = units_of(group_len(a, g1), 2);
        if (units + u > kW16BlockUnits) break;
        units += u;
        ++g1;
    }
    return g1;
}

// One row of int8 (W's or xq's, from column 0), groups [g0, g1), widened to int16 into out:
// group g at out + 2 * p.unit0[g - g0], an odd group's last pair ending in 0.
void w16_widen_row(const Args& a, const W16Panels& p, const int8_t* row, int g0, int g1, int16_t* out) {
    for (int g = g0; g < g1; ++g) {
        const int k0 = g * a.group, len = group_len(a, g);
        int16_t* o = out + static_cast<size_t>(p.unit0[g - g0]) * 2;
        int k = 0;
        for (; k + 16 <= len; k += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + k),
                                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k0 + k))));
        for (; k < len; ++k) o[k] = row[k0 + k];
        if (len % 2) o[len] = 0;
    }
}

// Rows [t0, t1) of xq (the last panel's rows past t1 zero), groups [g0, g1), into p: each row
// widened once, then its pairs stored 32 bits at a time at their unit's place in the panel.
void w16_pack_x(const Args& a, int t0, int t1, int g0, int g1, W16Panels& p) {
    p.unit0[0] = 0;
    for (int g = g0; g < g1; ++g) p.unit0[g - g0 + 1] = p.unit0[g - g0] + units_of(group_len(a, g), 2);
    const int units = p.unit0[g1 - g0];
    p.panels = (t1 - t0 + kW16Panel - 1) / kW16Panel;
    alignas(32) int16_t row16[2 * kW16BlockUnits];
    for (int i = 0; i < p.panels * kW16Panel; ++i) {
        const int t = t0 + i, row = i % kW16Panel;
        int16_t* px = p.x + static_cast<size_t>(i / kW16Panel) * kW16PanelInts + row * 2;
        float* xs = p.xs[i / kW16Panel] + row;
        if (t < t1) {
            w16_widen_row(a, p, a.xq + static_cast<size_t>(t) * a.K, g0, g1, row16);
            for (int g = g0; g < g1; ++g) xs[(g - g0) * kW16Panel] = a.xs[static_cast<size_t>(t) * a.gpr + g];
        } else {
            __builtin_memset(row16, 0, sizeof(int16_t) * 2 * units);
            for (int g = g0; g < g1; ++g) xs[(g - g0) * kW16Panel] = 0.0f;
        }
        for (int u = 0; u < units; ++u) __builtin_memcpy(px + static_cast<size_t>(u) * kW16Panel * 2, row16 + 2 * u, 4);
    }
}

// Rows n..n+R of W, groups [g0, g1), widened to int16 pairs: wb[r * units + u] holds the pair
// of unit u (the odd group's last pair ends in 0), as one 32-bit word to broadcast. The next
// tile's rows (n + R.., the same groups) are prefetched, to arrive while this tile computes.
template <int R>
void w16_widen(const Args& a, const W16Panels& p, int n, int g0, int g1, int32_t* wb) {
    const int K = a.K, group = a.group, units = p.unit0[g1 - g0];
    const int kb0 = g0 * group, kb1 = min_int(K, g1 * group);
    for (int r = R; r < 2 * R && n + r < a.N; ++r) {
        const int8_t* next = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n + r) * K;
        for (int k = kb0; k < kb1; k += 64) __builtin_prefetch(next + k);
    }
    for (int r = 0; r < R; ++r)
        w16_widen_row(a, p, static_cast<const int8_t*>(a.w) + static_cast<size_t>(n + r) * K, g0, g1,
                      reinterpret_cast<int16_t*>(wb + static_cast<size_t>(r) * units));
}

// One group of one row of W (a tile of N's last rows) against one panel: over `count` units
// from xp and from the widened row wu, the int32 sums against the panel's rows, then scaled
// into acc [1][16] as w16_group4 does. `units` is unused, to share w16_group4's signature.
__attribute__((noinline)) void w16_group1(const int16_t* xp, const int32_t* wu, int /*units*/, int count, const float* xs,
                                          const float* ws, int /*gpr*/, float (*acc)[kW16Panel]) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int u = 0; u < count; ++u, xp += kW16Panel * 2, ++wu) {
        const __m256i w = _mm256_set1_epi32(wu[0]);
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(xp)), w));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(xp + 16)), w));
    }
    const __m256 wsc = _mm256_set1_ps(ws[0]);
    _mm256_store_ps(acc[0], _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_mul_ps(_mm256_load_ps(xs), wsc), _mm256_load_ps(acc[0])));
    _mm256_store_ps(acc[0] + 8,
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_mul_ps(_mm256_load_ps(xs + 8), wsc), _mm256_load_ps(acc[0] + 8)));
}

// One group of 4 rows of W against one panel: over `count` units from xp and from the widened
// rows at wu (row stride `units`), the int32 sums of row r of W against the panel's rows
// 8b..8b+7, then those sums scaled into acc [4][16] (f32, row r of W by the panel's 16 rows):
//   acc[r][i] += sum[r][i] * xs[i] * ws[r * gpr].
// Not inlined, its sums named locals rather than an array: GCC 12 then keeps every sum and both
// x vectors in registers. Inlined into the tile it copied each sum once per unit; with the
// scaling left to the caller, it spilled and reloaded the caller's accumulators around every
// call and stored and reloaded the sums; with the loop over groups in here too, it spilled a
// sum inside the loop. The caller keeps nothing in vector registers across the call.
__attribute__((noinline)) void w16_group4(const int16_t* xp, const int32_t* wu, int units, int count, const float* xs,
                                          const float* ws, int gpr, float (*acc)[kW16Panel]) {
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
    for (int u = 0; u < count; ++u, xp += kW16Panel * 2, ++wu) {
        __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xp));
        __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xp + 16));
        // x in registers: GCC would fold its loads into every vpmaddwd, 8 loads a unit where 2
        // do, and the loads (2 a cycle) would bound the loop.
        __asm__("" : "+x"(x0), "+x"(x1));
        __m256i w = _mm256_set1_epi32(wu[0]);
        s00 = _mm256_add_epi32(s00, _mm256_madd_epi16(x0, w));
        s01 = _mm256_add_epi32(s01, _mm256_madd_epi16(x1, w));
        w = _mm256_set1_epi32(wu[units]);
        s10 = _mm256_add_epi32(s10, _mm256_madd_epi16(x0, w));
        s11 = _mm256_add_epi32(s11, _mm256_madd_epi16(x1, w));
        w = _mm256_set1_epi32(wu[2 * units]);
        s20 = _mm256_add_epi32(s20, _mm256_madd_epi16(x0, w));
        s21 = _mm256_add_epi32(s21, _mm256_madd_epi16(x1, w));
        w = _mm256_set1_epi32(wu[3 * units]);
        s30 = _mm256_add_epi32(s30, _mm256_madd_epi16(x0, w));
        s31 = _mm256_add_epi32(s31, _mm256_madd_epi16(x1, w));
    }
    const __m256 xs0 = _mm256_load_ps(xs), xs1 = _mm256_load_ps(xs + 8);
    const __m256i sums[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
    for (int r = 0; r < 4; ++r) {
        const __m256 wsc = _mm256_set1_ps(ws[static_cast<size_t>(r) * gpr]);
        _mm256_store_ps(acc[r], _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r][0]), _mm256_mul_ps(xs0, wsc), _mm256_load_ps(acc[r])));
        _mm256_store_ps(acc[r] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r][1]), _mm256_mul_ps(xs1, wsc), _mm256_load_ps(acc[r] + 8)));
    }
}

// R rows of W from n against the panels (rows t0..t1, groups g0..g1); the block of g0 == 0
// writes y with the bias, later blocks add to it.
template <int R>
void w16_tile(const Args& a, const W16Panels& p, int n, int t0, int t1, int g0, int g1) {
    alignas(32) int32_t wb[R * kW16BlockUnits];
    w16_widen<R>(a, p, n, g0, g1, wb);
    const int units = p.unit0[g1 - g0], gpr = a.gpr;
    const bool first = g0 == 0;
    for (int pi = 0; pi < p.panels; ++pi) {
        alignas(32) float acc[R][kW16Panel] = {};
        const int16_t* px = p.x + static_cast<size_t>(pi) * kW16PanelInts;
        constexpr auto group = R == 4 ? w16_group4 : w16_group1;
        for (int gl = 0; gl < g1 - g0; ++gl)
            group(px + static_cast<size_t>(p.unit0[gl]) * kW16Panel * 2, wb + p.unit0[gl], units, p.unit0[gl + 1] - p.unit0[gl],
                  p.xs[pi] + gl * kW16Panel, a.wscales + static_cast<size_t>(n) * gpr + g0 + gl, gpr, acc);
        const int rows = min_int(kW16Panel, t1 - t0 - pi * kW16Panel);
        float* y0 = a.y + static_cast<size_t>(t0 + pi * kW16Panel) * a.N + n;
        if constexpr (R == 4) {  // 8 rows at a time: [4 outputs][8 rows] transposed to one vector per row
            const __m128 b = first && a.bias ? _mm_loadu_ps(a.bias + n) : _mm_setzero_ps();
            for (int h = 0; h * 8 < rows; ++h) {
                const __m256 u0 = _mm256_unpacklo_ps(_mm256_load_ps(acc[0] + 8 * h), _mm256_load_ps(acc[1] + 8 * h));
                const __m256 u1 = _mm256_unpackhi_ps(_mm256_load_ps(acc[0] + 8 * h), _mm256_load_ps(acc[1] + 8 * h));
                const __m256 u2 = _mm256_unpacklo_ps(_mm256_load_ps(acc[2] + 8 * h), _mm256_load_ps(acc[3] + 8 * h));
                const __m256 u3 = _mm256_unpackhi_ps(_mm256_load_ps(acc[2] + 8 * h), _mm256_load_ps(acc[3] + 8 * h));
                const __m256 q[4] = {_mm256_shuffle_ps(u0, u2, 0x44), _mm256_shuffle_ps(u0, u2, 0xee), _mm256_shuffle_ps(u1, u3, 0x44),
                                     _mm256_shuffle_ps(u1, u3, 0xee)};  // q[j]: rows j (low half) and j + 4 (high)
                for (int i = 0; i < 8 && 8 * h + i < rows; ++i) {
                    float* yr = y0 + static_cast<size_t>(8 * h + i) * a.N;
                    const __m128 v = i < 4 ? _mm256_castps256_ps128(q[i]) : _mm256_extractf128_ps(q[i - 4], 1);
                    _mm_storeu_ps(yr, _mm_add_ps(v, first ? b : _mm_loadu_ps(yr)));
                }
            }
        } else {
            for (int i = 0; i < rows; ++i) {
                float* yr = y0 + static_cast<size_t>(i) * a.N;
                for (int r = 0; r < R; ++r) yr[r] = acc[r][i] + (first ? (a.bias ? a.bias[n + r] : 0.0f) : yr[r]);
            }
        }
    }
}

}  // namespace

void f32_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<GemmF32Ymm, float>(a, t_begin, t_end, n_begin, n_end, a.xf);
}

void f16_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    f_gemm<GemmF32Ymm, uint16_t>(a, t_begin, t_end, n_begin, n_end, a.xf);
}

void i8_gemm_avx2(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    // A group longer than a block: the row kernel.
    if (units_of(group_len(a, 0), 2) > kW16BlockUnits) return i8_rows_avx2(rows_slice(a, t_begin, t_end), n_begin, n_end);
    W16Panels panel;
    for (int t0 = t_begin; t0 < t_end; t0 += kW16Rows) {
        const int t1 = min_int(t_end, t0 + kW16Rows);
        for (int g0 = 0; g0 < a.gpr;) {
            const int g1 = w16_block_end(a, g0);
            w16_pack_x(a, t0, t1, g0, g1, panel);
            int n = n_begin;
            for (; n + 4 <= n_end; n += 4) w16_tile<4>(a, panel, n, t0, t1, g0, g1);
            for (; n < n_end; ++n) w16_tile<1>(a, panel, n, t0, t1, g0, g1);
            g0 = g1;
        }
    }
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

// Decode of cache_resident weights takes the 8-row kernel (Avx2Rows8, linear_avx2_dot.h),
// 16 KiB ahead; everything else the 4-row one.
void i8_rows_avx2(const Args& a, int n_begin, int n_end) {
    if (!takes_rows8_decode(a.cache_resident, a.T, a.K, a.group)) return i8_rows<Avx2Dot>(a, n_begin, n_end);
    rows8<Avx2Rows8, 16384>(a, n_begin, n_end, i8_rows<Avx2Dot>);
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
        __m256 vmax = _mm256_setzero_ps(), vprobe = _mm256_setzero_ps();  // probe: x * 0 summed (NaN for an inf or NaN)
        for (; k + 8 <= end; k += 8) {
            const __m256 v = _mm256_loadu_ps(x + k);
            vmax = _mm256_max_ps(vmax, _mm256_and_ps(v, abs_mask));
            vprobe = _mm256_fmadd_ps(v, _mm256_setzero_ps(), vprobe);
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float amax = _mm_cvtss_f32(m), probe = hsum(vprobe);
        for (; k < end; ++k) {
            const float v = __builtin_fabsf(x[k]);
            amax = v > amax ? v : amax;
            probe += x[k] * 0.0f;
        }
        const float inv = group_quant_factor(amax, probe == 0.0f, &xs[g]);
        if (inv == 0.0f) {
            for (k = begin; k < end; ++k) xq[k] = 0;
            continue;
        }
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
