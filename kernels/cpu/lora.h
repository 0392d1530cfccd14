// LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") beside a frozen
// linear layer y [T, N] = x [T, K] @ W^T: the adapted layer adds scale * (x @ A^T) @ B^T with
// A [r, K], B [N, r], scale = alpha / r (PEFT's lora_A / lora_B).
//
// Forward:  u [T, r] = x @ A^T;  y [T, N] += scale * u @ B^T.
// Backward (dy [T, N] given; u saved from the forward):
//   dB [N, r] += scale * dy^T @ u;  du [T, r] = scale * dy @ B;  dA [r, K] += du^T @ x;
//   dx [T, K] += du @ A  (skipped when dx is null).
// All f32; the pool splits rows; nothing is allocated.
#pragma once

#include "kernels/cpu/thread_pool.h"

namespace ember::kernels {

struct LoraShape {
    int T = 0;  // rows of x
    int K = 0;  // in features
    int N = 0;  // out features
    int r = 0;  // rank
    float scale = 0.0f;  // alpha / r (Hu et al. 2021, "LoRA", section 4.1)
};

void lora_forward_ref(const float* x, const float* A, const float* B, const LoraShape& s, float* u, float* y);
void lora_forward(const float* x, const float* A, const float* B, const LoraShape& s, float* u, float* y, ThreadPool& pool);

// du: [T, r] scratch (written).
void lora_backward_ref(const float* x, const float* u, const float* dy, const float* A, const float* B, const LoraShape& s,
                       float* dA, float* dB, float* du, float* dx);
void lora_backward(const float* x, const float* u, const float* dy, const float* A, const float* B, const LoraShape& s,
                   float* dA, float* dB, float* du, float* dx, ThreadPool& pool);

}  // namespace ember::kernels
