// LayerNorm on the GPU, torch.nn.functional.layer_norm over the last axis: for each row of
// x [T, C] (f32), out = (x - mean) / sqrt(var + eps) * weight + bias, written as fp16.
// Statistics in f32, two passes per row (mean, then the centred variance), so rows of large
// equal magnitude (+300/-300) give +1/-1 and nothing overflows fp16.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace ember::cuda {

// weight [C], bias [C] or null: device f32. out [T, C] fp16. Throws ember::Error if the
// launch fails.
void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, __half* out, cudaStream_t stream);

}  // namespace ember::cuda
