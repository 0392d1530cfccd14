#include "kernels/cpu/adamw.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace ember::kernels {

std::string adamw_params_problem(const AdamWParams& a) {
    std::ostringstream s;
    if (!std::isfinite(a.lr) || !(a.lr >= std::numeric_limits<float>::min())) {
        s << "lr " << a.lr << " must be finite and > 0 (at least " << std::numeric_limits<float>::min() << ", as --lr takes)";
    } else if (!std::isfinite(a.weight_decay) || !(a.weight_decay >= 0.0f)) {
        s << "weight decay " << a.weight_decay << " must be finite and >= 0";
    } else if (!std::isfinite(a.eps) || !(a.eps > 0.0f)) {
        s << "eps " << a.eps << " must be finite and > 0 (AdamW divides by sqrt(v) + eps)";
    } else if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f)) {
        s << "beta1 " << a.beta1 << " must be in [0, 1)";
    } else if (!(a.beta2 >= 0.0f && a.beta2 < 1.0f)) {
        s << "beta2 " << a.beta2 << " must be in [0, 1)";
    }
    return s.str();
}

double grad_norm(const float* g, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
    return std::sqrt(s);
}

float clip_grad_norm(float* g, size_t n, double norm, float max_norm) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0) return 1.0f;
    const float c = static_cast<float>(coef);
    for (size_t i = 0; i < n; ++i) g[i] *= c;
    return c;
}

void adamw_step_ref(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& a, int64_t t) {
    const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(t));
    for (size_t i = 0; i < n; ++i) {
        double pi = p[i] * (1.0 - static_cast<double>(a.lr) * a.weight_decay);
        const double mi = a.beta1 * static_cast<double>(m[i]) + (1.0 - a.beta1) * g[i];
        const double vi = a.beta2 * static_cast<double>(v[i]) + (1.0 - a.beta2) * static_cast<double>(g[i]) * g[i];
        pi -= a.lr / bc1 * mi / (std::sqrt(vi) / std::sqrt(bc2) + a.eps);
        p[i] = static_cast<float>(pi);
        m[i] = static_cast<float>(mi);
        v[i] = static_cast<float>(vi);
    }
}

void adamw_step(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& a, int64_t t) {
    // torch computes the bias corrections in double (Python floats) and the rest in f32.
    const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(t));
    const float step_size = static_cast<float>(a.lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float decay = 1.0f - a.lr * a.weight_decay;
    for (size_t i = 0; i < n; ++i) {
        p[i] *= decay;
        m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * g[i];
        v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + a.eps);
    }
}

}  // namespace ember::kernels
