#include "kernels/cuda/embedding.cuh"

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.cuh"

namespace ember::cuda {

namespace {

__global__ void embedding_kernel(kernels::WeightView wte, kernels::WeightView wpe, const int* ids, const int* pos0, float* x) {
    const int t = blockIdx.x;
    const int C = wte.cols;
    const int id = ids[t];
    const int pos = *pos0 + t;
    float* xt = x + static_cast<size_t>(t) * C;
    const bool ok = id >= 0 && id < wte.rows && pos >= 0 && pos < wpe.rows;
    for (int i = threadIdx.x; i < C; i += blockDim.x) xt[i] = ok ? weight_at(wte, id, i) + weight_at(wpe, pos, i) : __int_as_float(0x7fc00000);
}

}  // namespace

void embedding(const kernels::WeightView& wte, const kernels::WeightView& wpe, const int* ids, const int* pos0, int T,
               float* x, cudaStream_t stream) {
    if (T < 1) fail("embedding: T = ", T, " must be at least 1");
    if (wte.cols != wpe.cols) fail("embedding: wte has ", wte.cols, " columns, wpe ", wpe.cols);
    embedding_kernel<<<T, 128, 0, stream>>>(wte, wpe, ids, pos0, x);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
