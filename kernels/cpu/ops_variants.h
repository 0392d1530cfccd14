// Internal to attention.cpp, layernorm.cpp, activation.cpp and their per-CPU bodies
// (ops_avx2.cpp, ops_neon.cpp), as linear_variants.h is to linear. Each variant file is
// compiled with its own target flags; the op files, compiled without them, call one only after
// cpu_features.h says the CPU has it. So this header holds plain declarations only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_features.h"

namespace ember::kernels::ops_detail {

// Attention, one (query, head): scores[j] = (q . k[j * ldk + 0:n]) * scale for j < n_keys.
using ScoresFn = void (*)(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores);
// o[0:n] = sum_j w[j] * v[j * ldv + 0:n] over j < n_keys.
using WeightedSumFn = void (*)(const float* w, const float* v, int ldv, int n_keys, float* o, int n);
// The same two over an f16 cache (k, v binary16, widened to f32 as they are read).
using ScoresF16Fn = void (*)(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores);
using WeightedSumF16Fn = void (*)(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n);
// Prefill, four queries at once (each key row loaded and widened once for the four):
// scores[i * lds + j] = (q[i * ldq + 0:n] . k[j * ldk + 0:n]) * scale, i < 4, j < n_keys;
// o[i * ldo + 0:n] = sum_j w[i * ldw + j] * v[j * ldv + 0:n].
using Scores4Fn = void (*)(const float* q, int ldq, const float* k, int ldk, int n_keys, int n, float scale, float* scores, int lds);
using WeightedSum4Fn = void (*)(const float* w, int ldw, const float* v, int ldv, int n_keys, float* o, int ldo, int n);
using Scores4F16Fn = void (*)(const float* q, int ldq, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores,
                              int lds);
using WeightedSum4F16Fn = void (*)(const float* w, int ldw, const uint16_t* v, int ldv, int n_keys, float* o, int ldo, int n);
// y[0:n] = binary16(x[0:n]), round to nearest even.
using RoundF16Fn = void (*)(const float* x, uint16_t* y, int n);
// w[0:n] = softmax(w[0:n]) in place (n >= 1): e^(w - max), then divided by the sum.
using SoftmaxFn = void (*)(float* w, int n);
// One LayerNorm row of C values (layernorm.h); bias may be null; out may alias x.
using LayerNormRowFn = void (*)(const float* x, int C, const float* weight, const float* bias, float eps, float* out);
// activation() over n values in place (activation.h).
using ActivationFn = void (*)(ActivationKind kind, float* x, size_t n);

struct OpKernels {
    ScoresFn scores;
    WeightedSumFn weighted_sum;
    ScoresF16Fn scores_f16;
    WeightedSumF16Fn weighted_sum_f16;
    RoundF16Fn round_f16;
    SoftmaxFn softmax;
    LayerNormRowFn layernorm_row;
    ActivationFn activation;
    const char* name;  // "plain", "avx2", "neon"
    // Four-query loops (null: attention runs one query at a time).
    Scores4Fn scores4 = nullptr;
    WeightedSum4Fn weighted_sum4 = nullptr;
    Scores4F16Fn scores4_f16 = nullptr;
    WeightedSum4F16Fn weighted_sum4_f16 = nullptr;
};

// The kernels of `level`, or of the highest level below it that this CPU runs
// (cpu_level_clamp; avxvnni and avx512 use avx2's, dotprod uses neon's). Built once.
const OpKernels& op_kernels_at(CpuLevel level);
// op_kernels_at(cpu_level()).
const OpKernels& op_kernels();

// The plain C++ bodies (attention.cpp, layernorm.cpp, activation.cpp).
void scores_plain(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores);
void weighted_sum_plain(const float* w, const float* v, int ldv, int n_keys, float* o, int n);
void scores_f16_plain(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores);
void weighted_sum_f16_plain(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n);
void round_f16_plain(const float* x, uint16_t* y, int n);
void softmax_plain(float* w, int n);
void layernorm_row_plain(const float* x, int C, const float* weight, const float* bias, float eps, float* out);
void activation_plain(ActivationKind kind, float* x, size_t n);

#if defined(__x86_64__) || defined(__i386__)
void scores_avx2(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores);
void weighted_sum_avx2(const float* w, const float* v, int ldv, int n_keys, float* o, int n);
void scores_f16_avx2(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores);
void weighted_sum_f16_avx2(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n);
void round_f16_avx2(const float* x, uint16_t* y, int n);
void softmax_avx2(float* w, int n);
void layernorm_row_avx2(const float* x, int C, const float* weight, const float* bias, float eps, float* out);
void activation_avx2(ActivationKind kind, float* x, size_t n);
void scores4_avx2(const float* q, int ldq, const float* k, int ldk, int n_keys, int n, float scale, float* scores, int lds);
void weighted_sum4_avx2(const float* w, int ldw, const float* v, int ldv, int n_keys, float* o, int ldo, int n);
void scores4_f16_avx2(const float* q, int ldq, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores, int lds);
void weighted_sum4_f16_avx2(const float* w, int ldw, const uint16_t* v, int ldv, int n_keys, float* o, int ldo, int n);
#endif
#if defined(__aarch64__)
void scores_neon(const float* q, const float* k, int ldk, int n_keys, int n, float scale, float* scores);
void weighted_sum_neon(const float* w, const float* v, int ldv, int n_keys, float* o, int n);
void scores_f16_neon(const float* q, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores);
void weighted_sum_f16_neon(const float* w, const uint16_t* v, int ldv, int n_keys, float* o, int n);
void round_f16_neon(const float* x, uint16_t* y, int n);
void softmax_neon(float* w, int n);
void layernorm_row_neon(const float* x, int C, const float* weight, const float* bias, float eps, float* out);
void activation_neon(ActivationKind kind, float* x, size_t n);
void scores4_neon(const float* q, int ldq, const float* k, int ldk, int n_keys, int n, float scale, float* scores, int lds);
void weighted_sum4_neon(const float* w, int ldw, const float* v, int ldv, int n_keys, float* o, int ldo, int n);
void scores4_f16_neon(const float* q, int ldq, const uint16_t* k, int ldk, int n_keys, int n, float scale, float* scores, int lds);
void weighted_sum4_f16_neon(const float* w, int ldw, const uint16_t* v, int ldv, int n_keys, float* o, int ldo, int n);
#endif

}  // namespace ember::kernels::ops_detail
