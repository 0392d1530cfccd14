// Elementwise activations, in place over n values:
//   relu:      torch.nn.ReLU (the lecture's gpt.py)
//   gelu_erf:  torch.nn.GELU() = x * 0.5 * (1 + erf(x / sqrt(2)))      (nanoGPT)
//   gelu_tanh: torch.nn.GELU(approximate='tanh'), GPT-2's
//              0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
#pragma once

#include <cstddef>

namespace ember::kernels {

enum class ActivationKind { ReLU, GeluErf, GeluTanh };

void activation_ref(ActivationKind kind, float* x, size_t n);  // double precision
void activation(ActivationKind kind, float* x, size_t n);

// Backward: dx[i] = dy[i] * f'(pre[i]) with pre the input of the forward (ReLU' (0) = 0, as
// torch). dx may alias dy.
void activation_backward_ref(ActivationKind kind, const float* pre, const float* dy, float* dx, size_t n);
void activation_backward(ActivationKind kind, const float* pre, const float* dy, float* dx, size_t n);

}  // namespace ember::kernels
