// linear()'s int8 kernel with SDOT (compiled with -march=armv8.2-a+dotprod, run only where
// cpu_features.h finds HWCAP_ASIMDDP). Internal functions only, no std:: inline function: a
// non-inlined copy compiled with these flags could be linked into plain code.
#include <arm_neon.h>

#include "kernels/cpu/linear_int8_block.h"

namespace ember::kernels::linear_detail {

namespace {

// linear_int8_block.h's policy: SDOT, 16 products into 4 int32 lanes.
struct DotprodDot {
    using Vec = int8x16_t;
    using Sum = int32x4_t;
    using Acc = float32x4_t;
    static constexpr int kChunk = 16;
    struct Group {};
    static Vec load(const int8_t* p) { return vld1q_s8(p); }
    static void begin(Group&) {}
    static void step(Group&, Vec) {}
    static Sum zero() { return vdupq_n_s32(0); }
    static Sum dot(Sum s, Vec x, Vec w) { return vdotq_s32(s, x, w); }
    static Acc acc_zero() { return vdupq_n_f32(0.0f); }
    static Acc fma(Acc acc, Sum s, const Group&, float scale) { return vfmaq_n_f32(acc, vcvtq_f32_s32(s), scale); }
};

}  // namespace

void i8_rows_dotprod(const Args& a, int n_begin, int n_end) { i8_rows<DotprodDot>(a, n_begin, n_end); }

}  // namespace ember::kernels::linear_detail
