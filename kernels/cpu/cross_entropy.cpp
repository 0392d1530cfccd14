#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ember::kernels {

double cross_entropy_backward_ref(float* logits, const int* targets, int N, int V) {
    double total = 0.0;
    for (int i = 0; i < N; ++i) {
        float* row = logits + static_cast<size_t>(i) * V;
        double mx = row[0];
        for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
        double sum = 0.0;
        for (int v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
        total += std::log(sum) + mx - row[targets[i]];
        for (int v = 0; v < V; ++v) {
            row[v] = static_cast<float>((std::exp(row[v] - mx) / sum - (v == targets[i] ? 1.0 : 0.0)) / N);
        }
    }
    return total / N;
}

double cross_entropy_backward(float* logits, const int* targets, int N, int V) {
    double total = 0.0;
    const float inv_n = 1.0f / static_cast<float>(N);
    for (int i = 0; i < N; ++i) {
        float* row = logits + static_cast<size_t>(i) * V;
        const float mx = *std::max_element(row, row + V);
        const float target_logit = row[targets[i]] - mx;
        float sum = 0.0f;
        for (int v = 0; v < V; ++v) sum += (row[v] = std::exp(row[v] - mx));
        total += std::log(static_cast<double>(sum)) - target_logit;
        const float inv = inv_n / sum;
        for (int v = 0; v < V; ++v) row[v] *= inv;
        row[targets[i]] -= inv_n;
    }
    return total / N;
}

}  // namespace ember::kernels
