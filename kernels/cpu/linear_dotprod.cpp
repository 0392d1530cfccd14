// linear()'s int8 kernel with SDOT (compiled with -march=armv8.2-a+dotprod, run only where
// cpu_features.h finds HWCAP_ASIMDDP). Internal functions only, no std:: inline function: a
// non-inlined copy compiled with these flags could be linked into plain code.
#include <arm_neon.h>

#include "kernels/cpu/linear_gemm_int8.h"
#include "kernels/cpu/linear_int8_block.h"

namespace ember::kernels::linear_detail {

namespace {

// 16 int8 products into 4 int32 lanes with SDOT.
inline int32x4_t sdot16(int32x4_t acc, int8x16_t x, int8x16_t w) { return vdotq_s32(acc, x, w); }

// The GEMM's policy with SDOT; dot_lane by element (sdot v.4s, v.16b, v.4b[J]): no broadcast.
struct SdotGemm : NeonGemm<sdot16> {
    template <int J>
    static VecI dot_lane(VecI s, VecI x, VecI w) { return vdotq_laneq_s32(s, vreinterpretq_s8_s32(x), vreinterpretq_s8_s32(w), J); }
};

}  // namespace

void i8_rows_dotprod(const Args& a, int n_begin, int n_end) { i8_rows<NeonI8<sdot16>>(a, n_begin, n_end); }

// SDOT sums each lane's 4 products, which is what linear_gemm_int8.h's lanes need.
void i8_gemm_dotprod(const Args& a, int t_begin, int t_end, int n_begin, int n_end) {
    i8_gemm<SdotGemm>(a, t_begin, t_end, n_begin, n_end, i8_rows_dotprod);
}

}  // namespace ember::kernels::linear_detail
