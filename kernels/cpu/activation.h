// Elementwise activations, in place over n values:
//   relu:      torch.nn.ReLU (the lecture's gpt.py)
//   gelu_erf:  torch.nn.GELU() = x * 0.5 * (1 + erf(x / sqrt(2)))      (nanoGPT)
//   gelu_tanh: torch.nn.GELU(approximate='tanh'), GPT-2's
//              0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
#pragma once

#include <cstddef>

#include "kernels/cpu/cpu_features.h"

namespace ember::kernels {

enum class ActivationKind { ReLU, GeluErf, GeluTanh };

class ThreadPool;

void activation_ref(ActivationKind kind, float* x, size_t n);  // double precision
// Fast: cpu_level()'s loop (cpu_features.h). The AVX2 and NEON GELUs evaluate erf and tanh
// through a vector e^x (Cephes' expf; erf by Abramowitz and Stegun 7.1.26, |error| < 1.5e-7),
// not libm: within a few 1e-7 of activation_ref.
void activation(ActivationKind kind, float* x, size_t n);
// The same over rows x [T, F], rows split across `pool` (ThreadPool::row_grain); each row's
// result is activation(kind, row, F)'s, bit for bit.
void activation(ActivationKind kind, float* x, int T, int F, ThreadPool& pool);
// activation() with the loop of `level`, or of the highest level below it this CPU runs.
void activation_at(CpuLevel level, ActivationKind kind, float* x, size_t n);

// Backward: dx[i] = dy[i] * f'(pre[i]) with pre the input of the forward (ReLU' (0) = 0, as
// torch). dx may alias dy.
void activation_backward_ref(ActivationKind kind, const float* pre, const float* dy, float* dx, size_t n);
void activation_backward(ActivationKind kind, const float* pre, const float* dy, float* dx, size_t n);
// The same over rows [T, F], rows split across `pool`.
void activation_backward(ActivationKind kind, const float* pre, const float* dy, float* dx, int T, int F, ThreadPool& pool);

}  // namespace ember::kernels
