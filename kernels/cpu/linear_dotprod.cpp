// linear()'s int8 kernel with SDOT (compiled with -march=armv8.2-a+dotprod, run only where
// cpu_features.h finds HWCAP_ASIMDDP). Internal functions only, no std:: inline function: a
// non-inlined copy compiled with these flags could be linked into plain code.
#include <arm_neon.h>

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {

namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

// The part of a group past its last whole 16-byte chunk (short groups, K or the group size
// not a multiple of 16), R rows of W (stride K): tail[r] += x_scale * w_scale[r * gpr] * x . w_r.
template <int R>
void add_tail(const int8_t* x, const int8_t* w, int K, int k, int end, float x_scale, const float* w_scale, int gpr,
              float* tail) {
    for (int r = 0; r < R; ++r) {
        int s = 0;
        for (int i = k; i < end; ++i) s += x[i] * w[static_cast<size_t>(r) * K + i];
        tail[r] += static_cast<float>(s) * x_scale * w_scale[static_cast<size_t>(r) * gpr];
    }
}

// y[0..R) = horizontal sums of acc[0..R) + tail + bias (bias may be null).
template <int R>
void store_rows(const float32x4_t* acc, const float* tail, const float* bias, float* y) {
    if constexpr (R == 4) {
        float32x4_t v = vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3]));
        v = vaddq_f32(v, vld1q_f32(tail));
        if (bias) v = vaddq_f32(v, vld1q_f32(bias));
        vst1q_f32(y, v);
    } else {
        for (int r = 0; r < R; ++r) y[r] = vaddvq_f32(acc[r]) + tail[r] + (bias ? bias[r] : 0.0f);
    }
}

// R rows of W (from row n) against every row of x: x loaded once per chunk for R rows.
template <int R>
void i8_block(const Args& a, int n) {
    const int K = a.K, group = a.group, gpr = a.gpr;
    const int8_t* w = static_cast<const int8_t*>(a.w) + static_cast<size_t>(n) * K;
    const float* ws = a.wscales + static_cast<size_t>(n) * gpr;
    for (int t = 0; t < a.T; ++t) {
        const int8_t* x = a.xq + static_cast<size_t>(t) * K;
        const float* xs = a.xs + static_cast<size_t>(t) * gpr;
        float32x4_t acc[R];
        float tail[R];
        for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f), tail[r] = 0.0f;
        for (int g = 0; g < gpr; ++g) {
            const int end = min_int(K, (g + 1) * group);
            int32x4_t s[R];
            for (int r = 0; r < R; ++r) s[r] = vdupq_n_s32(0);
            int k = g * group;
            for (; k + 16 <= end; k += 16) {
                const int8x16_t vx = vld1q_s8(x + k);
                for (int r = 0; r < R; ++r) s[r] = vdotq_s32(s[r], vx, vld1q_s8(w + static_cast<size_t>(r) * K + k));
            }
            for (int r = 0; r < R; ++r) {
                const float scale = xs[g] * ws[static_cast<size_t>(r) * gpr + g];
                acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s[r]), scale);
            }
            if (k < end) add_tail<R>(x, w, K, k, end, xs[g], ws + g, gpr, tail);
        }
        store_rows<R>(acc, tail, a.bias ? a.bias + n : nullptr, a.y + static_cast<size_t>(t) * a.N + n);
    }
}

}  // namespace

void i8_rows_dotprod(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<4>(a, n);
    for (; n < n_end; ++n) i8_block<1>(a, n);
}

}  // namespace ember::kernels::linear_detail
