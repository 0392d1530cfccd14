// Helpers for the CUDA suites: device buffers, host weights in the three dtypes and their
// device views, random data.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/weights.h"
#include "kernels/cuda/check.h"

namespace ember::test {

// One cudaMalloc, freed at scope exit.
template <typename T>
class DeviceBuffer {
public:
    explicit DeviceBuffer(size_t n) : n_(n) { EMBER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), (n ? n : 1) * sizeof(T))); }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
    ~DeviceBuffer() { cudaFree(p_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    T* get() const { return p_; }
    void upload(const std::vector<T>& host) {
        EMBER_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<T> h(n_);
        EMBER_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }

private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

// fp16 bits <-> float on the host (kernels/cpu/half.h), vector-wise.
inline std::vector<uint16_t> to_half(const std::vector<float>& x) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = kernels::float_to_half(x[i]);
    return h;
}
inline std::vector<float> from_half(const std::vector<uint16_t>& h) {
    std::vector<float> x(h.size());
    for (size_t i = 0; i < h.size(); ++i) x[i] = kernels::half_to_float(h[i]);
    return x;
}
// Rounds each value through fp16 (what a kernel reading fp16 sees).
inline std::vector<float> round_half(const std::vector<float>& x) { return from_half(to_half(x)); }

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// A weight W [rows, cols] built from f32 values, stored in `type` on the host (int8:
// symmetric groups, scale = absmax / 127), with a host view and a device copy + view.
struct TestWeight {
    kernels::WType type = kernels::WType::F32;
    int rows = 0, cols = 0, group_size = 0;
    std::vector<float> f32;
    std::vector<uint16_t> f16;
    std::vector<int8_t> i8;
    std::vector<float> scales;
    kernels::WeightView host;
    kernels::WeightView device;
    std::vector<void*> allocations;

    TestWeight(const std::vector<float>& values, int r, int c, kernels::WType t, int group = 0)
        : type(t), rows(r), cols(c), group_size(group > 0 ? group : c) {
        host.type = t;
        host.rows = r;
        host.cols = c;
        if (t == kernels::WType::F32) {
            f32 = values;
            host.data = f32.data();
        } else if (t == kernels::WType::F16) {
            f16 = to_half(values);
            host.data = f16.data();
        } else {
            host.group_size = group_size;
            const int groups = (c + group_size - 1) / group_size;
            i8.resize(static_cast<size_t>(r) * c);
            scales.resize(static_cast<size_t>(r) * groups);
            for (int i = 0; i < r; ++i) {
                for (int g = 0; g < groups; ++g) {
                    const int k0 = g * group_size, k1 = std::min(c, k0 + group_size);
                    float amax = 0.0f;
                    for (int k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(values[static_cast<size_t>(i) * c + k]));
                    const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
                    scales[static_cast<size_t>(i) * groups + g] = s;
                    for (int k = k0; k < k1; ++k)
                        i8[static_cast<size_t>(i) * c + k] = static_cast<int8_t>(std::lround(values[static_cast<size_t>(i) * c + k] / s));
                }
            }
            host.data = i8.data();
            host.scales = scales.data();
        }
        device = host;
        const size_t bytes = static_cast<size_t>(r) * c * (t == kernels::WType::F32 ? 4 : t == kernels::WType::F16 ? 2 : 1);
        device.data = copy(host.data, bytes);
        if (t == kernels::WType::I8) device.scales = static_cast<const float*>(copy(scales.data(), scales.size() * sizeof(float)));
    }
    ~TestWeight() {
        for (void* p : allocations) cudaFree(p);
    }
    TestWeight(const TestWeight&) = delete;
    TestWeight& operator=(const TestWeight&) = delete;

private:
    void* copy(const void* src, size_t bytes) {
        void* p = nullptr;
        EMBER_CUDA_CHECK(cudaMalloc(&p, bytes));
        allocations.push_back(p);
        EMBER_CUDA_CHECK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
        return p;
    }
};

}  // namespace ember::test
