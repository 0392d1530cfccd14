// The CUDA backend (backend.h) on an NVIDIA GPU, built with EMBER_CUDA into the module
// libember-cuda.so (cuda_module.h). Same contract as the CPU backend, computed with the
// kernels of kernels/cuda: fp16 activations with f32 accumulation, an f32 residual
// stream, f32 LayerNorm statistics and softmax, f32 logits. qkv and the MLP hidden layer are
// stored in fp16: a value past 65504 becomes inf there (kernels/cuda/linear.cuh), where the CPU
// backend stays finite.
//
// Memory: one cudaMalloc at construction holds the weights as stored in the file (int8 stays
// int8; no second fp16 copy) and the planned arena (CudaPlan); pinned host buffers for ids,
// step parameters and logits are allocated there too. Nothing is allocated per token.
// Decode (one token, last-row logits) is captured once as a CUDA graph and replayed; the
// step's token, position, cache row and key count travel in a small device buffer (one
// host-to-device copy per step) that the graph's kernels read. Prefill (T > 1) runs the same kernels plus cuBLASLt matrix products
// (int8 / f32 weights expanded to fp16 one matrix at a time into a planned scratch).
// Every CUDA and cuBLASLt failure throws ember::Error naming the call, file and line.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/gemm.h"
#include "runtime/backend.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace ember {

// Byte offsets in the one device allocation (256-byte aligned). Letters as in model.h.
struct CudaPlan {
    size_t weights = 0;          // bytes of the uploaded weights (offset 0)
    size_t x = 0;                // [S, C] f32 residual stream
    size_t xn = 0;               // [S, C] fp16 LayerNorm output
    size_t qkv = 0;              // [S, 3C] fp16
    size_t att = 0;              // [S, C] fp16
    size_t hidden = 0;           // [S, F] fp16
    size_t gemm_out = 0;         // [S, max(3C, F)] f32 (prefill products before the epilogue)
    size_t wscratch = 0;         // [wscratch_elems] fp16: an int8/f32 matrix expanded (prefill)
    size_t wscratch_elems = 0;
    size_t logits = 0;           // [logit_rows, V] f32
    size_t k_cache = 0, v_cache = 0;  // [L, S, C] fp16 each
    size_t step = 0;             // [4 + S] int: pos0, row0, n_keys0, T, then the ids
    size_t ids = 0;              // = step + 4 ints: [S] ids
    size_t workspace = 0;        // cuBLASLt workspace
    size_t workspace_bytes = 0;
    size_t total = 0;
    int logit_rows = 1;
};

// Plans the device allocation. Pure arithmetic on the configuration and the tensor sizes.
CudaPlan plan_cuda_memory(const Model& model, bool all_logits);

class CudaBackend : public Backend {
public:
    // Uploads the weights, plans and allocates, captures the decode graph. Throws ember::Error
    // (no device, out of memory, head_size over kernels/cuda's limit, any failing call).
    CudaBackend(const Model& model, const SessionOptions& opts);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    // Logits in pinned host memory.
    const float* forward(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows) override;
    HostScratch host_scratch() override { return {history_.data(), window_.data(), sampler_probs_.data(), sampler_ids_.data(),
                                                     repeat_logits_.data(), repeat_ids_.data()}; }
    const char* name() const override { return "cuda"; }
    size_t arena_bytes() const override { return plan_.total; }
    std::string describe() const override;

    const CudaPlan& plan() const { return plan_; }
    // Whether decode replays a CUDA graph. If capturing it failed, decode launches its kernels
    // one by one instead (same results, slower) and graph_error() says why.
    bool graph_captured() const { return graph_exec_ != nullptr; }
    const std::string& graph_error() const { return graph_error_; }

private:
    void release() noexcept;
    void enqueue_forward(int T, bool all_rows);  // kernels only, on stream_ (capturable for T == 1)
    void linear(const __half* x, int T, const kernels::WeightView& w, const float* b, cuda::Act act, __half* y);
    void linear(const __half* x, int T, const kernels::WeightView& w, const float* b, bool accumulate, float* y);
    const __half* f16_weights(const kernels::WeightView& w);  // w itself, or expanded into wscratch
    void capture_decode_graph();
    template <typename T>
    T* dev(size_t off) const { return reinterpret_cast<T*>(base_ + off); }

    const Model& model_;
    SessionOptions opts_;
    CudaPlan plan_;
    uint8_t* base_ = nullptr;     // the one device allocation
    cudaStream_t stream_ = nullptr;
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t graph_exec_ = nullptr;
    std::unique_ptr<cuda::Gemm> gemm_;
    int* h_step_ = nullptr;       // pinned [4 + S]: step parameters, then ids
    float* h_logits_ = nullptr;   // pinned [logit_rows, V]
    ModelWeights w_;  // the model's views, pointing into the device allocation
    std::vector<float> sampler_probs_;
    std::vector<int> sampler_ids_;
    std::vector<float> repeat_logits_;  // [V]
    std::vector<int> repeat_ids_;       // [S]
    std::vector<int> history_, window_;  // [S] each: the Session's context bookkeeping
    std::string graph_error_;
};

int cuda_devices();              // cudaGetDeviceCount, 0 on any error; never throws
CudaDeviceInfo cuda_device();    // device 0; throws ember::Error

}  // namespace ember
