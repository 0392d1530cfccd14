// The int8 GEMM of linear()'s prefill (T >= kGemmMinRows, linear.cpp), shared by the SIMD
// variants (linear_avx2.cpp, linear_avxvnni.cpp, linear_avx512.cpp, linear_neon.cpp,
// linear_dotprod.cpp; linear_i8mm.cpp its packing and blocking). Same math as linear_int8_block.h:
//   y[t, n] = sum_g (xq_t . wq_n)_g * xs[t, g] * ws[n, g] + bias[n],
// with the integer dot products per group, but vector lanes run over rows of x (t), not over k:
//
//   - a panel of PT = P * NB rows of xq (P lanes a vector, NB vectors) is packed, per group, in
//     quads: unit q of group g holds bytes 4q..4q+3 of the group for each of the PT rows
//     ([PT][4] bytes; a group's last quad is zero-padded, rows past T are zero);
//   - a register tile of R rows of W x PT rows of x: per quad, R 4-byte words of W are
//     broadcast to every lane and multiplied into the NB x vectors (vpdpbusd / vpmaddubsw /
//     SDOT: 4 products into each int32 lane), R * NB int32 accumulators per group; NEON
//     loads 16 bytes (4 quads) of each row of W at once and takes quad j from lane j (SDOT
//     by element; a DUP of the lane without dotprod), the quads past the group's last 4
//     whole ones as above;
//   - at the end of a group one f32 fma per accumulator: acc += f32(s) * xs[t, g] * ws[n, g],
//     xs a vector over the lanes, ws one broadcast: the group's float work is shared by
//     group / 4 integer steps (the row kernel pays it per 4 rows of W and one x row);
//   - the packed panel is cache-blocked over K (whole groups, at most kPanelBytes, in L1) and
//     every tile of the task's rows of W runs against it; later blocks add to y.
// Packing gives the same integers as linear_int8_block.h, so the variants still differ from
// the plain kernel only in the order of f32 additions. Groups too long for one block
// (group_size 0 on a very long row) take the row kernel.
//
// The ISA comes in as a policy D with:
//   P, NB, R                                lanes per vector, vectors per panel, rows of W per tile
//   kUnit                                   4: the quads above (linear_i8mm.cpp packs units of 8
//                                           with pack_panel / gemm_blocks and has its own tile)
//   kSurplus                                whether dot() gives (w + 128) . x (vpdpbusd): then
//                                           128 * sum(x) per row and group is subtracted
//   VecI, VecF                              int32 / f32 lanes (P of them)
//   VecI load_x(const int8_t* p)            4 * P bytes of the packed panel
//   VecI bcast_w(uint32_t w4)               a 4-byte word of W in every lane
//   VecI dot(VecI s, VecI x, VecI w)        s + per-lane 4-byte dot products
//   kLanes                                  whether gemm_tile takes a group's whole quads 4 at a
//                                           time (NEON): then also
//   VecI load_w(const int8_t* p)            16 bytes of a row of W (4 quads)
//   VecI dot_lane<J>(VecI s, VecI x, VecI w) dot() against quad J of w in every lane
//   VecI izero(), VecF fzero()
//   VecF group_fma(VecF acc, VecI s, const int32_t* surplus, const float* xs, float ws)
//   void store(float* out, VecF v)          P floats
// Only the variant files include this header, each with its own target flags; everything has
// internal linkage (see linear_int8_block.h).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {
namespace {

constexpr int kPanelBytes = 32768;  // packed x per K block: fits L1 with W's rows beside it
constexpr int kBlockGroups = 64;    // groups per K block at most (sizes the per-group arrays)

inline int gemm_min(int a, int b) { return a < b ? a : b; }

inline int quads_of(int len) { return (len + 3) / 4; }

// 4 bytes of p as one word; n < 4 of them (the rest 0) in load_word_n, byte by byte (no
// memcpy call for a variable length).
inline uint32_t load_word(const int8_t* p) {
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
inline uint32_t load_word_n(const int8_t* p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
    return v;
}

template <class D>
struct GemmPanel {
    static constexpr int PT = D::P * D::NB;
    alignas(64) int8_t x[kPanelBytes];          // [units of the block][PT][kUnit]
    alignas(64) float xs[kBlockGroups * PT];    // [group of the block][PT]
    alignas(64) int32_t sur[kBlockGroups * PT]; // [group of the block][PT]: 128 * sum(x)
    int unit0[kBlockGroups + 1];                // first unit (quad) of each group of the block
};

inline int units_of(int len, int unit) { return (len + unit - 1) / unit; }

// The length of group g of a row (the last may be short).
inline int group_len(const Args& a, int g) { return gemm_min(a.K, (g + 1) * a.group) - g * a.group; }

// Rows [t0, t1) of x, xq, xs and y as a call of their own: for a row kernel that takes the
// rows a GEMM cannot block.
inline Args rows_slice(const Args& a, int t0, int t1) {
    Args sub = a;
    sub.T = t1 - t0;
    sub.xq = a.xq + static_cast<size_t>(t0) * a.K;
    sub.xs = a.xs + static_cast<size_t>(t0) * a.gpr;
    sub.y = a.y + static_cast<size_t>(t0) * a.N;
    return sub;
}

// Packs rows [t0, t0 + PT) (those < t_end) of xq, groups [g0, g1), into p, in units of
// D::kUnit bytes (4: quads; 8 for SMMLA).
template <class D>
void pack_panel(const Args& a, int t0, int t_end, int g0, int g1, GemmPanel<D>& p) {
    constexpr int PT = GemmPanel<D>::PT, U = D::kUnit;
    const int K = a.K, group = a.group, gpr = a.gpr;
    p.unit0[0] = 0;
    for (int g = g0; g < g1; ++g) p.unit0[g - g0 + 1] = p.unit0[g - g0] + units_of(gemm_min(K, (g + 1) * group) - g * group, U);
    for (int i = 0; i < PT; ++i) {
        const int t = t0 + i;
        const int8_t* xt = t < t_end ? a.xq + static_cast<size_t>(t) * K : nullptr;
        for (int g = g0; g < g1; ++g) {
            const int gl = g - g0, k0 = g * group, len = gemm_min(K, k0 + group) - k0;
            int8_t* dst = p.x + static_cast<size_t>(p.unit0[gl]) * PT * U + i * U;
            if (t >= t_end) {
                for (int q = 0; q < units_of(len, U); ++q) __builtin_memset(dst + static_cast<size_t>(q) * PT * U, 0, U);
                p.xs[gl * PT + i] = 0.0f;
                p.sur[gl * PT + i] = 0;
                continue;
            }
            const int full = len / U;
            for (int q = 0; q < full; ++q) __builtin_memcpy(dst + static_cast<size_t>(q) * PT * U, xt + k0 + q * U, U);
            if (full * U < len) {
                int8_t* d = dst + static_cast<size_t>(full) * PT * U;
                for (int b = 0; b < U; ++b) d[b] = full * U + b < len ? xt[k0 + full * U + b] : 0;
            }
            int32_t sum = 0;
            if constexpr (D::kSurplus) {
                for (int k = 0; k < len; ++k) sum += xt[k0 + k];
            }
            p.xs[gl * PT + i] = a.xs[static_cast<size_t>(t) * gpr + g];
            p.sur[gl * PT + i] = 128 * sum;
        }
    }
}

// The GEMM's blocking: for each panel of PT rows of x in [t_begin, t_end) and each K block of
// whole groups (at most kPanelBytes packed), packs the panel and calls tile(t0, g0, g1), which
// runs the task's rows of W against it (g0 == 0: the first block, which writes y). Groups too
// long for one block go to `rows`, the variant's row kernel, instead.
template <class D, class Tile>
void gemm_blocks(const Args& a, int t_begin, int t_end, int n_begin, int n_end, RowsFn rows, GemmPanel<D>& panel, Tile tile) {
    constexpr int PT = GemmPanel<D>::PT, U = D::kUnit;
    if (units_of(gemm_min(a.K, a.group), U) * U * PT > kPanelBytes) return rows(rows_slice(a, t_begin, t_end), n_begin, n_end);
    for (int t0 = t_begin; t0 < t_end; t0 += PT) {
        for (int g0 = 0; g0 < a.gpr;) {
            int g1 = g0, bytes = 0;
            while (g1 < a.gpr && g1 - g0 < kBlockGroups) {
                const int b = units_of(gemm_min(a.K, (g1 + 1) * a.group) - g1 * a.group, U) * U * PT;
                if (bytes + b > kPanelBytes) break;
                bytes += b;
                ++g1;
            }
            pack_panel<D>(a, t0, t_end, g0, g1, panel);
            tile(t0, g0, g1);
            g0 = g1;
        }
    }
}

// One quad of the packed panel (xq) against lane J of wv, 16 bytes of each of RR rows of W.
template <class D, int RR, int J>
inline void quad_lane(typename D::VecI (&s)[RR][D::NB], const int8_t* xq, const typename D::VecI (&wv)[RR]) {
    typename D::VecI xv[D::NB];
    for (int b = 0; b < D::NB; ++b) xv[b] = D::load_x(xq + b * D::P * 4);
    for (int r = 0; r < RR; ++r)
        for (int b = 0; b < D::NB; ++b) s[r][b] = D::template dot_lane<J>(s[r][b], xv[b], wv[r]);
}

// RR rows of W from n against the packed panel (rows t0.., groups g0..g1); first: the first
// K block, which writes y with the bias, the others add to y.
template <class D, int RR>
void gemm_tile(const Args& a, const GemmPanel<D>& p, int n, int t0, int t_end, int g0, int g1, bool first) {
    constexpr int P = D::P, NB = D::NB, PT = GemmPanel<D>::PT;
    static_assert(D::kUnit == 4, "gemm_tile takes quads");
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    typename D::VecF acc[RR][NB];
    for (int r = 0; r < RR; ++r)
        for (int b = 0; b < NB; ++b) acc[r][b] = D::fzero();
    for (int g = g0; g < g1; ++g) {
        const int gl = g - g0, k0 = g * group, len = gemm_min(K, k0 + group) - k0;
        const int8_t* xp = p.x + static_cast<size_t>(p.unit0[gl]) * PT * 4;
        typename D::VecI s[RR][NB];
        for (int r = 0; r < RR; ++r)
            for (int b = 0; b < NB; ++b) s[r][b] = D::izero();
        const int full = len / 4, quads = quads_of(len);
        int q = 0;
        if constexpr (D::kLanes) {
            // 4 whole quads at a time: 16 bytes of each row of W loaded once, quad j taken as lane j.
            for (const int full4 = full & ~3; q < full4; q += 4) {
                typename D::VecI wv[RR];
                for (int r = 0; r < RR; ++r) wv[r] = D::load_w(w + static_cast<size_t>(r) * K + k0 + q * 4);
                const int8_t* xq = xp + static_cast<size_t>(q) * PT * 4;
                quad_lane<D, RR, 0>(s, xq, wv);
                quad_lane<D, RR, 1>(s, xq + PT * 4, wv);
                quad_lane<D, RR, 2>(s, xq + PT * 8, wv);
                quad_lane<D, RR, 3>(s, xq + PT * 12, wv);
            }
        }
        for (; q < quads; ++q) {
            typename D::VecI xv[NB];
            for (int b = 0; b < NB; ++b) xv[b] = D::load_x(xp + static_cast<size_t>(q) * PT * 4 + b * P * 4);
            for (int r = 0; r < RR; ++r) {
                const int8_t* wq = w + static_cast<size_t>(r) * K + k0 + q * 4;
                // The group's last, short quad: W read only up to the group's end.
                const typename D::VecI wv = D::bcast_w(q < full ? load_word(wq) : load_word_n(wq, len - full * 4));
                for (int b = 0; b < NB; ++b) s[r][b] = D::dot(s[r][b], xv[b], wv);
            }
        }
        for (int r = 0; r < RR; ++r) {
            const float wsc = ws[static_cast<size_t>(r) * gpr + g];
            for (int b = 0; b < NB; ++b) acc[r][b] = D::group_fma(acc[r][b], s[r][b], p.sur + gl * PT + b * P, p.xs + gl * PT + b * P, wsc);
        }
    }
    for (int r = 0; r < RR; ++r) {
        const float b0 = first ? (a.bias ? a.bias[n + r] : 0.0f) : 0.0f;
        for (int b = 0; b < NB; ++b) {
            float out[P];
            D::store(out, acc[r][b]);
            for (int l = 0; l < P; ++l) {
                const int t = t0 + b * P + l;
                if (t >= t_end) break;
                float& yv = a.y[static_cast<size_t>(t) * a.N + n + r];
                yv = first ? out[l] + b0 : yv + out[l];
            }
        }
    }
}

// y[t_begin:t_end, n_begin:n_end]; `rows`, the variant's row kernel, takes groups no block holds.
template <class D>
void i8_gemm(const Args& a, int t_begin, int t_end, int n_begin, int n_end, RowsFn rows) {
    GemmPanel<D> panel;
    gemm_blocks<D>(a, t_begin, t_end, n_begin, n_end, rows, panel, [&](int t0, int g0, int g1) {
        int n = n_begin;
        for (; n + D::R <= n_end; n += D::R) gemm_tile<D, D::R>(a, panel, n, t0, t_end, g0, g1, g0 == 0);
        for (; n < n_end; ++n) gemm_tile<D, 1>(a, panel, n, t0, t_end, g0, g1, g0 == 0);
    });
}

#if defined(__ARM_NEON)
// The NEON policy: 4 rows of x a vector, 2 vectors a panel (8 rows), 4 rows of W a tile (16
// accumulators); Dot4 gives each int32 lane the dot product of its 4 bytes of x and w
// (SDOT in linear_dotprod.cpp, widening multiplies in linear_neon.cpp). Signed by signed: no surplus.
template <int32x4_t (*Dot4)(int32x4_t, int8x16_t, int8x16_t)>
struct NeonGemm {
    static constexpr int P = 4, NB = 2, R = 4, kUnit = 4;
    static constexpr bool kSurplus = false;
    using VecI = int32x4_t;
    using VecF = float32x4_t;
    static VecI load_x(const int8_t* p) { return vreinterpretq_s32_s8(vld1q_s8(p)); }
    static VecI bcast_w(uint32_t w4) { return vreinterpretq_s32_u32(vdupq_n_u32(w4)); }
    static VecI dot(VecI s, VecI x, VecI w) { return Dot4(s, vreinterpretq_s8_s32(x), vreinterpretq_s8_s32(w)); }
    // 4 quads of W in one load; each broadcast from its lane (linear_dotprod.cpp: SDOT by element).
    static constexpr bool kLanes = true;
    static VecI load_w(const int8_t* p) { return vreinterpretq_s32_s8(vld1q_s8(p)); }
    template <int J>
    static VecI dot_lane(VecI s, VecI x, VecI w) { return dot(s, x, vdupq_laneq_s32(w, J)); }
    static VecI izero() { return vdupq_n_s32(0); }
    static VecF fzero() { return vdupq_n_f32(0.0f); }
    static VecF group_fma(VecF acc, VecI s, const int32_t*, const float* xs, float ws) {
        return vfmaq_f32(acc, vcvtq_f32_s32(s), vmulq_n_f32(vld1q_f32(xs), ws));
    }
    static void store(float* out, VecF v) { vst1q_f32(out, v); }
};
#endif

}  // namespace
}  // namespace ember::kernels::linear_detail
