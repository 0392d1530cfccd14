// LayerNorm over the last axis, torch.nn.functional.layer_norm: for each row of x [T, C],
// out = (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance.
// weight [C]; bias [C] or null (nanoGPT's bias=False). out may alias x.
#pragma once

#include "kernels/cpu/cpu_features.h"

namespace ember::kernels {

class ThreadPool;

// Plain reference in double precision.
void layernorm_ref(const float* x, int T, int C, const float* weight, const float* bias, float eps,
                   float* out);

// Two passes per row in f32 (mean, then centred variance), which stays exact for rows of
// large equal magnitude where the one-pass E[x^2] - E[x]^2 formula cancels. The row loop is
// cpu_level()'s (cpu_features.h: AVX2 + FMA on x86-64, NEON on aarch64, else plain).
void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, float* out);
// The same, rows split across `pool` (ThreadPool::row_grain rows per task at the least); each
// row's result is the one above, bit for bit.
void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, float* out, ThreadPool& pool);
// layernorm() with the row loop of `level`, or of the highest level below it this CPU runs.
void layernorm_at(CpuLevel level, const float* x, int T, int C, const float* weight, const float* bias, float eps,
                  float* out);

// Backward to the input only (weight and bias are frozen): with xhat = (x - mean) * rstd and
// g = dy * weight, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, ADDED to dx
// [T, C] (the residual stream's gradient accumulates). Mean and rstd are recomputed from x.
void layernorm_backward_ref(const float* x, int T, int C, const float* weight, float eps, const float* dy, float* dx);
void layernorm_backward(const float* x, int T, int C, const float* weight, float eps, const float* dy, float* dx);
// The same, rows split across `pool`.
void layernorm_backward(const float* x, int T, int C, const float* weight, float eps, const float* dy, float* dx, ThreadPool& pool);

}  // namespace ember::kernels
