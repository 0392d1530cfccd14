// The activation fused into the CUDA linear kernels (bias first, then the activation), as
// kernels/cpu/activation.h defines them: ReLU (gpt.py), GELU erf (nanoGPT), GELU tanh (GPT-2).
#pragma once

#include "kernels/cpu/activation.h"

namespace ember::cuda {

enum class Act { None, ReLU, GeluErf, GeluTanh };

// The CUDA epilogue's activation for a model's MLP activation (kernels/cpu/activation.h); None
// is for products without one (qkv, proj, lm_head), which no ActivationKind names.
inline Act act_of(kernels::ActivationKind k) {
    return k == kernels::ActivationKind::ReLU ? Act::ReLU : k == kernels::ActivationKind::GeluErf ? Act::GeluErf : Act::GeluTanh;
}

}  // namespace ember::cuda
