// Random data and error measures for the kernel tests (tests/test_kernels.cpp,
// tests/test_lora_kernels.cpp, tests/firmware/test_linear_variants.cpp, test_kernel_variants.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ember::test {

// n values from N(0, scale^2), the same for the same seed.
inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// max |a - b| / max(1, max |b|); NaN where any difference is NaN (std::max would drop it, so an
// output left unwritten in a NaN-filled buffer passed).
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    double err = 0.0, mag = 1.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (!(d <= err)) err = d;
        mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
    }
    return err / mag;
}

// Normalized mean squared error, as ggml's test-backend-ops reports it.
inline double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
        den += static_cast<double>(ref[i]) * ref[i];
    }
    return num / den;
}

}  // namespace ember::test
