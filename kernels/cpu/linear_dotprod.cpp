// linear()'s int8 kernel with SDOT (compiled with -march=armv8.2-a+dotprod, run only where
// cpu_features.h finds HWCAP_ASIMDDP). Internal functions only, no std:: inline function: a
// non-inlined copy compiled with these flags could be linked into plain code.
#include <arm_neon.h>

#include "kernels/cpu/linear_variants.h"

namespace ember::kernels::linear_detail {

namespace {

inline int min_int(int a, int b) { return a < b ? a : b; }

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
            int it[R];
            for (int r = 0; r < R; ++r) s[r] = vdupq_n_s32(0), it[r] = 0;
            int k = g * group;
            for (; k + 16 <= end; k += 16) {
                const int8x16_t vx = vld1q_s8(x + k);
                for (int r = 0; r < R; ++r) s[r] = vdotq_s32(s[r], vx, vld1q_s8(w + static_cast<size_t>(r) * K + k));
            }
            for (; k < end; ++k) {
                for (int r = 0; r < R; ++r) it[r] += x[k] * w[static_cast<size_t>(r) * K + k];
            }
            for (int r = 0; r < R; ++r) {
                const float scale = xs[g] * ws[static_cast<size_t>(r) * gpr + g];
                acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s[r]), scale);
                tail[r] += static_cast<float>(it[r]) * scale;
            }
        }
        float* y = a.y + static_cast<size_t>(t) * a.N + n;
        for (int r = 0; r < R; ++r) y[r] = vaddvq_f32(acc[r]) + tail[r] + (a.bias ? a.bias[n + r] : 0.0f);
    }
}

}  // namespace

void i8_rows_dotprod(const Args& a, int n_begin, int n_end) {
    int n = n_begin;
    for (; n + 4 <= n_end; n += 4) i8_block<4>(a, n);
    for (; n < n_end; ++n) i8_block<1>(a, n);
}

}  // namespace ember::kernels::linear_detail
