#include "kernels/cpu/layernorm.h"

#include <cmath>
#include <cstddef>

#include "kernels/cpu/ops_variants.h"
#include "kernels/cpu/thread_pool.h"

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

namespace ops_detail {

// The plain body of ops_variants.h's LayerNormRowFn.
void layernorm_row_plain(const float* xr, int C, const float* weight, const float* bias, float eps, float* o) {
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

}  // namespace ops_detail

namespace {

void run_layernorm(ops_detail::LayerNormRowFn row, const float* x, int T, int C, const float* weight,
                   const float* bias, float eps, float* out) {
    for (int t = 0; t < T; ++t) row(x + static_cast<size_t>(t) * C, C, weight, bias, eps, out + static_cast<size_t>(t) * C);
}

}  // namespace

void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, float* out) {
    run_layernorm(ops_detail::op_kernels().layernorm_row, x, T, C, weight, bias, eps, out);
}

void layernorm(const float* x, int T, int C, const float* weight, const float* bias, float eps, float* out, ThreadPool& pool) {
    const auto row = ops_detail::op_kernels().layernorm_row;
    pool.parallel_for(T, ThreadPool::row_grain(static_cast<size_t>(C)), [&](int t0, int t1, int) {
        const size_t at = static_cast<size_t>(t0) * C;
        run_layernorm(row, x + at, t1 - t0, C, weight, bias, eps, out + at);
    });
}

void layernorm_at(CpuLevel level, const float* x, int T, int C, const float* weight, const float* bias, float eps,
                  float* out) {
    run_layernorm(ops_detail::op_kernels_at(level).layernorm_row, x, T, C, weight, bias, eps, out);
}

}  // namespace ember::kernels

namespace ember::kernels {

void layernorm_backward_ref(const float* x, int T, int C, const float* weight, float eps, const float* dy, float* dx) {
    for (int t = 0; t < T; ++t) {
        const float* xr = x + static_cast<size_t>(t) * C;
        const float* g = dy + static_cast<size_t>(t) * C;
        float* o = dx + static_cast<size_t>(t) * C;
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < C; ++c) mean += xr[c];
        mean /= C;
        for (int c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
        const double rstd = 1.0 / std::sqrt(var / C + eps);
        double mg = 0.0, mgx = 0.0;
        for (int c = 0; c < C; ++c) {
            const double gw = static_cast<double>(g[c]) * weight[c];
            mg += gw;
            mgx += gw * (xr[c] - mean) * rstd;
        }
        mg /= C;
        mgx /= C;
        for (int c = 0; c < C; ++c) {
            const double xhat = (xr[c] - mean) * rstd;
            o[c] += static_cast<float>(rstd * (static_cast<double>(g[c]) * weight[c] - mg - xhat * mgx));
        }
    }
}

void layernorm_backward(const float* x, int T, int C, const float* weight, float eps, const float* dy, float* dx) {
    for (int t = 0; t < T; ++t) {
        const float* xr = x + static_cast<size_t>(t) * C;
        const float* g = dy + static_cast<size_t>(t) * C;
        float* o = dx + static_cast<size_t>(t) * C;
        float sum = 0.0f;
        for (int c = 0; c < C; ++c) sum += xr[c];
        const float mean = sum / C;
        float sq = 0.0f;
        for (int c = 0; c < C; ++c) sq += (xr[c] - mean) * (xr[c] - mean);
        const float rstd = 1.0f / std::sqrt(sq / C + eps);
        float mg = 0.0f, mgx = 0.0f;
        for (int c = 0; c < C; ++c) {
            const float gw = g[c] * weight[c];
            mg += gw;
            mgx += gw * (xr[c] - mean) * rstd;
        }
        mg /= C;
        mgx /= C;
        for (int c = 0; c < C; ++c) o[c] += rstd * (g[c] * weight[c] - mg - (xr[c] - mean) * rstd * mgx);
    }
}

void layernorm_backward(const float* x, int T, int C, const float* weight, float eps, const float* dy, float* dx, ThreadPool& pool) {
    pool.parallel_for(T, ThreadPool::row_grain(static_cast<size_t>(C)), [&](int t0, int t1, int) {
        const size_t at = static_cast<size_t>(t0) * C;
        layernorm_backward(x + at, t1 - t0, C, weight, eps, dy + at, dx + at);
    });
}

}  // namespace ember::kernels
