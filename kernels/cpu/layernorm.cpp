#include "kernels/cpu/layernorm.h"

#include <cmath>
#include <cstddef>

namespace ember::kernels {

void layernorm_ref(const float* x, int T, int C, const float* weight, const float* bias, float eps,
                   float* out) {
    for (int t = 0; t < T; ++t) {
        const float* xr = x + static_cast<size_t>(t) * C;
        float* o = out + static_cast<size_t>(t) * C;
        double mean = 0.0;
        for (int c = 0; c < C; ++c) mean += xr[c];
        mean /= C;
        double var = 0.0;
        for (int c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
        var /= C;
        const double rstd = 1.0 / std::sqrt(var + eps);
        for (int c = 0; c < C; ++c) {
            o[c] = static_cast<float>((xr[c] - mean) * rstd * weight[c] + (bias ? bias[c] : 0.0));
        }
    }
}

void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, float* out) {
    for (int t = 0; t < T; ++t) {
        const float* xr = x + static_cast<size_t>(t) * C;
        float* o = out + static_cast<size_t>(t) * C;
        float sum = 0.0f;
        for (int c = 0; c < C; ++c) sum += xr[c];
        const float mean = sum / C;
        float sq = 0.0f;
        for (int c = 0; c < C; ++c) {
            const float d = xr[c] - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / std::sqrt(sq / C + eps);
        if (bias) {
            for (int c = 0; c < C; ++c) o[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
        } else {
            for (int c = 0; c < C; ++c) o[c] = (xr[c] - mean) * rstd * weight[c];
        }
    }
}

}  // namespace ember::kernels
