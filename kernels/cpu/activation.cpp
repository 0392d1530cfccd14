#include "kernels/cpu/activation.h"

#include <cmath>

#include "kernels/cpu/ops_variants.h"
#include "kernels/cpu/thread_pool.h"

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

namespace ops_detail {

// The plain body of ops_variants.h's ActivationFn (also the variants' tail).
void activation_plain(ActivationKind kind, float* x, size_t n) {
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

}  // namespace ops_detail

void activation(ActivationKind kind, float* x, size_t n) { ops_detail::op_kernels().activation(kind, x, n); }

void activation(ActivationKind kind, float* x, int T, int F, ThreadPool& pool) {
    const auto fn = ops_detail::op_kernels().activation;
    pool.parallel_for(T, ThreadPool::row_grain(static_cast<size_t>(F)), [&](int t0, int t1, int) {
        for (int t = t0; t < t1; ++t) fn(kind, x + static_cast<size_t>(t) * F, static_cast<size_t>(F));
    });
}

void activation_at(CpuLevel level, ActivationKind kind, float* x, size_t n) {
    ops_detail::op_kernels_at(level).activation(kind, x, n);
}

}  // namespace ember::kernels

namespace ember::kernels {

namespace {
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)
}

void activation_backward_ref(ActivationKind kind, const float* pre, const float* dy, float* dx, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const double v = pre[i];
        double d = 0.0;
        switch (kind) {
        case ActivationKind::ReLU: d = v > 0.0 ? 1.0 : 0.0; break;
        case ActivationKind::GeluErf: d = 0.5 * (1.0 + std::erf(v * kInvSqrt2)) + v * std::exp(-0.5 * v * v) * kInvSqrt2Pi; break;
        case ActivationKind::GeluTanh: {
            const double t = std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v));
            d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * v * v);
            break;
        }
        }
        dx[i] = static_cast<float>(dy[i] * d);
    }
}

void activation_backward(ActivationKind kind, const float* pre, const float* dy, float* dx, size_t n) {
    switch (kind) {
    case ActivationKind::ReLU:
        for (size_t i = 0; i < n; ++i) dx[i] = pre[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case ActivationKind::GeluErf:
        for (size_t i = 0; i < n; ++i) {
            const float v = pre[i];
            const float d = 0.5f * (1.0f + std::erf(v * static_cast<float>(kInvSqrt2))) +
                            v * std::exp(-0.5f * v * v) * static_cast<float>(kInvSqrt2Pi);
            dx[i] = dy[i] * d;
        }
        break;
    case ActivationKind::GeluTanh:
        for (size_t i = 0; i < n; ++i) {
            const float v = pre[i];
            const float k = static_cast<float>(kSqrt2OverPi);
            const float t = std::tanh(k * (v + 0.044715f * v * v * v));
            dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * v * v));
        }
        break;
    }
}

void activation_backward(ActivationKind kind, const float* pre, const float* dy, float* dx, int T, int F, ThreadPool& pool) {
    pool.parallel_for(T, ThreadPool::row_grain(static_cast<size_t>(F)), [&](int t0, int t1, int) {
        const size_t at = static_cast<size_t>(t0) * F;
        activation_backward(kind, pre + at, dy + at, dx + at, static_cast<size_t>(t1 - t0) * F);
    });
}

}  // namespace ember::kernels
