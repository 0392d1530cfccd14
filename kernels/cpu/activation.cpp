#include "kernels/cpu/activation.h"

#include <cmath>

namespace ember::kernels {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
}  // namespace

void activation_ref(ActivationKind kind, float* x, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const double v = x[i];
        double r = 0.0;
        switch (kind) {
        case ActivationKind::ReLU: r = v > 0.0 ? v : 0.0; break;
        case ActivationKind::GeluErf: r = 0.5 * v * (1.0 + std::erf(v * kInvSqrt2)); break;
        case ActivationKind::GeluTanh: r = 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))); break;
        }
        x[i] = static_cast<float>(r);
    }
}

void activation(ActivationKind kind, float* x, size_t n) {
    switch (kind) {
    case ActivationKind::ReLU:
        for (size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case ActivationKind::GeluErf:
        for (size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * static_cast<float>(kInvSqrt2)));
        break;
    case ActivationKind::GeluTanh:
        for (size_t i = 0; i < n; ++i) {
            const float v = x[i];
            x[i] = 0.5f * v * (1.0f + std::tanh(static_cast<float>(kSqrt2OverPi) * (v + 0.044715f * v * v * v)));
        }
        break;
    }
}

}  // namespace ember::kernels
