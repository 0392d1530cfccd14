// Device helpers shared by the .cu files of kernels/cuda (never included by host-only code):
// weight element loads for the three stored dtypes, warp and block sums, activations.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cpu/weights.h"
#include "kernels/cuda/activation.h"

namespace ember::cuda {

// W[row, col] as f32; W a kernels::WeightView whose pointers are device pointers.
// int8: q * scales[row * groups_per_row + col / group_size] (kernels/cpu/weights.h).
__device__ __forceinline__ float weight_at(const kernels::WeightView& w, int row, int col) {
    const size_t i = static_cast<size_t>(row) * w.cols + col;
    switch (w.type) {
    case kernels::WType::F32: return static_cast<const float*>(w.data)[i];
    case kernels::WType::F16: return __half2float(static_cast<const __half*>(w.data)[i]);
    default: {
        const int groups = (w.cols + w.group_size - 1) / w.group_size;
        const float s = w.scales[static_cast<size_t>(row) * groups + col / w.group_size];
        return static_cast<float>(static_cast<const int8_t*>(w.data)[i]) * s;
    }
    }
}

// Sum over the 32 lanes of a warp; every lane gets the total.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Maximum over the 32 lanes of a warp; every lane gets it.
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
// red: __shared__ float[32]. Safe to call repeatedly with the same red.
__device__ __forceinline__ float block_sum(float v, float* red) {
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    __syncthreads();  // an earlier call may still be reading red
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < n_warps; ++i) total += red[i];
    return total;
}

// The activations of kernels/cpu/activation.h, in f32.
__device__ __forceinline__ float activate(Act a, float x) {
    switch (a) {
    case Act::ReLU: return x > 0.0f ? x : 0.0f;
    case Act::GeluErf: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Act::GeluTanh: {
        const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
    default: return x;
    }
}

}  // namespace ember::cuda
