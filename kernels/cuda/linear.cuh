// Linear layers on the GPU, torch.nn.functional.linear: y = x @ W^T + bias, then an optional
// activation (kernels/cuda/activation.h), W [N, K] in f32, f16 or int8 groups (a device
// kernels::WeightView; int8 dequantized on the fly with its group scales). fp16 activations
// in, f32 accumulation.
//
// Decode (one row): linear_gemv, one warp per output; the output is fp16 (qkv, MLP hidden)
// or f32, optionally added to what is there (the residual stream x += proj(att); logits).
// Prefill (T rows): the matrix product runs in cuBLASLt (gemm.h) on fp16 weights (int8 and
// f32 weights are first expanded by dequantize_f16 into a planned scratch, one matrix at a
// time), into an f32 buffer; linear_epilogue then adds the bias, applies the activation and
// stores fp16 or adds into f32.
// An fp16 output rounds as __float2half does: a value past +-65504 (fp16's largest) becomes
// +-inf, which attention then turns into NaN logits (the sampler never draws those; the CPU
// backend, f32 throughout, keeps such a model finite).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cpu/weights.h"
#include "kernels/cuda/activation.h"

namespace ember::cuda {

// x [K] fp16, 4-byte aligned (the arena's buffers are 256-byte aligned); bias [N] f32 or null;
// y [N]. Throws ember::Error on a bad shape, a misaligned x or a failed launch.
void linear_gemv(const __half* x, const kernels::WeightView& w, const float* bias, Act act, __half* y, cudaStream_t stream);
// accumulate: y += result (residual), else y = result.
void linear_gemv(const __half* x, const kernels::WeightView& w, const float* bias, Act act, bool accumulate, float* y,
                 cudaStream_t stream);

// Decode with the LayerNorm in front fused: y = act(layernorm(x; ln_w, ln_b, eps) @ W^T + bias),
// x [K] f32, ln_w [K], ln_b [K] or null, the normalized row rounded to fp16 as layernorm()
// writes it. K at most kMaxLayerNormGemvCols (it lives in shared memory).
constexpr int kMaxLayerNormGemvCols = 16384;
void layernorm_linear_gemv(const float* x, const float* ln_w, const float* ln_b, float eps, const kernels::WeightView& w,
                           const float* bias, Act act, __half* y, cudaStream_t stream);

// out [rows, cols] fp16 = W dequantized (any dtype; f16 is copied). Throws ember::Error.
void dequantize_f16(const kernels::WeightView& w, __half* out, cudaStream_t stream);

// After a matrix product y [T, N] f32 (no bias yet): out = act(y + bias) as fp16.
void linear_epilogue(const float* y, int T, int N, const float* bias, Act act, __half* out, cudaStream_t stream);
// out = act(y + bias) or out += act(y + bias) (accumulate), f32; out may be y.
void linear_epilogue(const float* y, int T, int N, const float* bias, Act act, bool accumulate, float* out, cudaStream_t stream);

}  // namespace ember::cuda
