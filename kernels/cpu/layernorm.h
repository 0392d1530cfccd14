// LayerNorm over the last axis, torch.nn.functional.layer_norm: for each row of x [T, C],
// out = (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance.
// weight [C]; bias [C] or null (nanoGPT's bias=False). out may alias x.
#pragma once

namespace ember::kernels {

// Plain reference in double precision.
void layernorm_ref(const float* x, int T, int C, const float* weight, const float* bias, float eps,
                   float* out);

// Two passes per row in f32 (mean, then centred variance), which stays exact for rows of
// large equal magnitude where the one-pass E[x^2] - E[x]^2 formula cancels.
void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, float* out);

}  // namespace ember::kernels
