// The table of attention / layernorm / activation bodies per CPU level (ops_variants.h).
// Compiled without the variants' flags: it only takes their addresses.
#include "kernels/cpu/ops_variants.h"

namespace ember::kernels::ops_detail {

namespace {

OpKernels kernels_for(CpuLevel level) {
    OpKernels k{scores_plain, weighted_sum_plain, scores_f16_plain, weighted_sum_f16_plain, round_f16_plain,
             softmax_plain, layernorm_row_plain, activation_plain, "plain"};
#if defined(__x86_64__) || defined(__i386__)
    if (level == CpuLevel::Avx2 || level == CpuLevel::AvxVnni || level == CpuLevel::Avx512) {
        k = {scores_avx2, weighted_sum_avx2, scores_f16_avx2, weighted_sum_f16_avx2, round_f16_avx2,
             softmax_avx2, layernorm_row_avx2, activation_avx2, "avx2"};
        k.scores4 = scores4_avx2, k.weighted_sum4 = weighted_sum4_avx2;
        k.scores4_f16 = scores4_f16_avx2, k.weighted_sum4_f16 = weighted_sum4_f16_avx2;
    }
#elif defined(__aarch64__)
    if (level == CpuLevel::Neon || level == CpuLevel::Dotprod || level == CpuLevel::I8mm) {
        k = {scores_neon, weighted_sum_neon, scores_f16_neon, weighted_sum_f16_neon, round_f16_neon,
             softmax_neon, layernorm_row_neon, activation_neon, "neon"};
        k.scores4 = scores4_neon, k.weighted_sum4 = weighted_sum4_neon;
        k.scores4_f16 = scores4_f16_neon, k.weighted_sum4_f16 = weighted_sum4_f16_neon;
    }
#endif
    return k;
}

}  // namespace

const OpKernels& op_kernels_at(CpuLevel level) {
    static const OpKernels table[] = {kernels_for(CpuLevel::Plain),   kernels_for(CpuLevel::Avx2),
                                      kernels_for(CpuLevel::AvxVnni), kernels_for(CpuLevel::Avx512),
                                      kernels_for(CpuLevel::Neon),    kernels_for(CpuLevel::Dotprod),
                                      kernels_for(CpuLevel::I8mm)};
    static const CpuFeatures features = detect_cpu_features();
    return table[static_cast<int>(cpu_level_clamp(level, features))];
}

const OpKernels& op_kernels() {
    static const OpKernels& k = op_kernels_at(cpu_level());
    return k;
}

}  // namespace ember::kernels::ops_detail

namespace ember::kernels {

const char* ops_kernel_name() { return ops_detail::op_kernels().name; }

}  // namespace ember::kernels
