// linear()'s int8 GEMM with SMMLA (FEAT_I8MM; compiled with -march=armv8.2-a+dotprod+i8mm, run
// only where cpu_features.h finds HWCAP2_I8MM and dotprod). Decode (T < kGemmMinRows) runs the
// dotprod row kernel. Internal functions only, no std:: inline function (see linear_dotprod.cpp).
//
// vmmlaq_s32(acc, a, b) adds the 2 x 2 products of a's two rows of 8 bytes by b's two rows:
// lanes [a0.b0, a0.b1, a1.b0, a1.b1]. x is packed as linear_gemm_int8.h packs it, in units of
// 8 bytes (kUnit) instead of 4: one 16-byte vector holds 8 bytes of a group for two rows of x,
// and two rows of W's 8 bytes make the other operand, so each lane is one (row of x, row of W)
// and a tile of 4 rows of W x 8 rows of x is 8 accumulators; the group's scale is the vector
// [xs_t0 ws_r0, xs_t0 ws_r1, xs_t1 ws_r0, xs_t1 ws_r1], and a lane pair stores as two
// adjacent floats of y.
#include <arm_neon.h>

#include "kernels/cpu/linear_gemm_int8.h"

namespace ember::kernels::linear_detail {

namespace {

// The packing policy for pack_panel (only P * NB, kUnit and kSurplus are used from it).
struct I8mmPack {
    static constexpr int P = 2, NB = 4, R = 4, kUnit = 8;
    static constexpr bool kSurplus = false;
};

inline int8x8_t load8_n(const int8_t* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
    return vreinterpret_s8_u64(vcreate_u64(v));
}

// Rows [n, n + rows) of W (rows 1..4; missing rows repeat the last and are not stored).
void i8mm_tile(const Args& a, const GemmPanel<I8mmPack>& p, int n, int rows, int t0, int t_end, int g0, int g1, bool first) {
    constexpr int PT = GemmPanel<I8mmPack>::PT, U = I8mmPack::kUnit;
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w[4];
    const float* ws[4];
    for (int r = 0; r < 4; ++r) {
        const int rr = r < rows ? r : rows - 1;
        w[r] = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n + rr) * K;
        ws[r] = a.wscales + static_cast<size_t>(n + rr) * gpr;
    }
    float32x4_t acc[2][4];
    for (int j = 0; j < 2; ++j)
        for (int b = 0; b < 4; ++b) acc[j][b] = vdupq_n_f32(0.0f);
    for (int g = g0; g < g1; ++g) {
        const int gl = g - g0, k0 = g * group, len = gemm_min(K, k0 + group) - k0;
        const int8_t* xp = p.x + static_cast<size_t>(p.unit0[gl]) * PT * U;
        int32x4_t s[2][4];
        for (int j = 0; j < 2; ++j)
            for (int b = 0; b < 4; ++b) s[j][b] = vdupq_n_s32(0);
        const int full = len / U, units = (len + U - 1) / U;
        for (int u = 0; u < units; ++u) {
            const int k = k0 + u * U;
            int8x16_t wv[2];
            for (int j = 0; j < 2; ++j) {  // the group's last, short unit: W read only up to its end
                const int8x8_t lo = u < full ? vld1_s8(w[2 * j] + k) : load8_n(w[2 * j] + k, len - full * U);
                const int8x8_t hi = u < full ? vld1_s8(w[2 * j + 1] + k) : load8_n(w[2 * j + 1] + k, len - full * U);
                wv[j] = vcombine_s8(lo, hi);
            }
            for (int b = 0; b < 4; ++b) {
                const int8x16_t xv = vld1q_s8(xp + static_cast<size_t>(u) * PT * U + b * 16);
                for (int j = 0; j < 2; ++j) s[j][b] = vmmlaq_s32(s[j][b], xv, wv[j]);
            }
        }
        for (int j = 0; j < 2; ++j) {
            const float w0 = ws[2 * j][g], w1 = ws[2 * j + 1][g];
            const float32x4_t wsv = {w0, w1, w0, w1};
            for (int b = 0; b < 4; ++b) {
                const float x0 = p.xs[gl * PT + 2 * b], x1 = p.xs[gl * PT + 2 * b + 1];
                const float32x4_t xsv = {x0, x0, x1, x1};
                acc[j][b] = vfmaq_f32(acc[j][b], vcvtq_f32_s32(s[j][b]), vmulq_f32(xsv, wsv));
            }
        }
    }
    for (int j = 0; j < 2; ++j) {
        for (int b = 0; b < 4; ++b) {
            float out[4];
            vst1q_f32(out, acc[j][b]);
            for (int l = 0; l < 4; ++l) {
                const int t = t0 + 2 * b + l / 2, r = 2 * j + l % 2;
                if (t >= t_end || r >= rows) continue;
                float& yv = a.y[static_cast<size_t>(t) * a.N + n + r];
                yv = first ? out[l] + (a.bias ? a.bias[n + r] : 0.0f) : yv + out[l];
            }
        }
    }
}

}  // namespace

void i8_gemm_i8mm(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    GemmPanel<I8mmPack> panel;
    gemm_blocks<I8mmPack>(a, t_begin, t_end, n_begin, n_end, i8_rows_dotprod, panel, [&](int t0, int g0, int g1) {
        for (int n = n_begin; n < n_end; n += 4) i8mm_tile(a, panel, n, gemm_min(4, n_end - n), t0, t_end, g0, g1, g0 == 0);
    });
}

}  // namespace ember::kernels::linear_detail
