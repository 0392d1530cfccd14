#include "runtime/cuda_backend.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/linear.cuh"
#include "runtime/arena.h"
#include "runtime/error.h"
#include "runtime/tensors.h"

namespace ember {

namespace {

constexpr size_t kDeviceAlign = 256;
constexpr size_t kWorkspaceBytes = 4u << 20;  // cuBLASLt workspace

size_t align_up(size_t n) { return (n + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }

size_t element_bytes(kernels::WType t) { return t == kernels::WType::F32 ? 4 : t == kernels::WType::F16 ? 2 : 1; }

// Walks every weight of `model` in the canonical table's order (runtime/tensors.h), asking
// put(src, bytes) for a device pointer for each present tensor; fills `out` with the same
// views pointing into device memory. Used once to size, once to copy.
template <typename Put>
void map_weights(const Model& model, Put put, ModelWeights& out) {
    const ModelConfig& c = model.config();
    out = model.weights();  // host views: every present pointer is replaced below
    for_each_weight(out, c, [&](const CanonicalEntry& e, WeightSlot slot) {
        if (slot.vec) {
            if (*slot.vec) *slot.vec = static_cast<const float*>(put(*slot.vec, static_cast<size_t>(e.shape[0]) * sizeof(float)));
            return;
        }
        kernels::WeightView& v = *slot.mat;
        v.data = put(v.data, static_cast<size_t>(v.rows) * v.cols * element_bytes(v.type));
        v.scales = v.type == kernels::WType::I8
                       ? static_cast<const float*>(put(v.scales, static_cast<size_t>(v.rows) * v.groups_per_row() * sizeof(float)))
                       : nullptr;
    });
    if (c.tied_lm_head) out.lm_head = out.wte;  // tied: one copy
}

}  // namespace

int cuda_devices() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the error a missing driver leaves
        return 0;
    }
    return n;
}

CudaDeviceInfo cuda_device() {
    if (cuda_devices() < 1) fail("no CUDA device found");
    cudaDeviceProp p{};
    EMBER_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    int clock_khz = 0, bus_bits = 0;
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0));
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
    CudaDeviceInfo info;
    info.name = p.name;
    info.major = p.major;
    info.minor = p.minor;
    info.total_bytes = p.totalGlobalMem;
    info.peak_bytes_per_s = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;  // double data rate
    return info;
}

CudaPlan plan_cuda_memory(const Model& model, bool all_logits) {
    const ModelConfig& c = model.config();
    const size_t S = c.block_size, C = c.n_embd, F = c.ffn_hidden, V = c.vocab_size, L = c.n_layer;
    CudaPlan p;
    ArenaPlanner a(kDeviceAlign);  // the weights first, then the arena
    ModelWeights unused;
    map_weights(model, [&](const void* src, size_t bytes) -> void* {
        if (src) a.take(bytes);
        return nullptr;
    }, unused);
    p.weights = a.total();
    auto take = [&](size_t bytes) { return a.take(bytes); };
    // The largest matrix a prefill product expands to fp16 (int8 or f32 storage).
    const ModelWeights& w = model.weights();
    auto expand = [&](const kernels::WeightView& v) {
        if (v.type != kernels::WType::F16) p.wscratch_elems = std::max(p.wscratch_elems, static_cast<size_t>(v.rows) * v.cols);
    };
    for (const auto& l : w.layers) {
        for (const auto* v : {&l.qkv, &l.proj, &l.fc, &l.fc2}) expand(*v);
    }
    if (all_logits) expand(w.lm_head);
    p.logit_rows = all_logits ? c.block_size : 1;
    p.x = take(S * C * 4);
    p.xn = take(S * C * 2);
    p.qkv = take(S * 3 * C * 2);
    p.att = take(S * C * 2);
    p.hidden = take(S * F * 2);
    p.gemm_out = take(S * std::max(3 * C, F) * 4);
    p.wscratch = take(p.wscratch_elems * 2);
    p.logits = take(static_cast<size_t>(p.logit_rows) * V * 4);
    p.k_cache = take(L * S * C * 2);
    p.v_cache = take(L * S * C * 2);
    p.step = take((4 + S) * sizeof(int));
    p.ids = p.step + 4 * sizeof(int);
    p.workspace_bytes = kWorkspaceBytes;
    p.workspace = take(p.workspace_bytes);
    p.total = a.total();
    return p;
}

CudaBackend::CudaBackend(const Model& model, const SessionOptions& opts) : model_(model), opts_(opts) {
    const ModelConfig& c = model.config();
    if (cuda_devices() < 1) fail("no CUDA device found (use --backend cpu)");
    if (c.head_size() > cuda::kMaxHeadSize) fail("head_size ", c.head_size(), " is over the CUDA kernels' limit of ", cuda::kMaxHeadSize);
    if (c.n_embd > cuda::kMaxLayerNormGemvCols) fail("n_embd ", c.n_embd, " is over the CUDA kernels' limit of ", cuda::kMaxLayerNormGemvCols);
    plan_ = plan_cuda_memory(model, opts.all_logits);
    const size_t S = c.block_size, V = c.vocab_size;
    try {
        EMBER_CUDA_CHECK(cudaSetDevice(0));
        const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&base_), plan_.total);
        if (e != cudaSuccess) {
            base_ = nullptr;
            (void)cudaGetLastError();
            fail("cannot allocate ", plan_.total, " bytes on the GPU (weights ", plan_.weights, " + arena): ", cudaGetErrorString(e));
        }
        EMBER_CUDA_CHECK(cudaMemset(base_, 0, plan_.total));
        size_t off = 0;
        map_weights(model, [&](const void* src, size_t bytes) -> void* {
            if (!src) return nullptr;
            uint8_t* at = base_ + off;
            off += align_up(bytes);
            if (off > plan_.weights) fail("CUDA weight upload overruns its plan (", off, " > ", plan_.weights, " bytes)");
            EMBER_CUDA_CHECK(cudaMemcpy(at, src, bytes, cudaMemcpyHostToDevice));
            return at;
        }, w_);
        // The memset and the copies ran on the legacy default stream, and a copy from pageable
        // memory (the mapped file) may return before its DMA lands; stream_ is non-blocking, so
        // nothing orders them before its first kernel: wait for them here.
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        EMBER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_step_), (4 + S) * sizeof(int)));
        EMBER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_logits_), static_cast<size_t>(plan_.logit_rows) * V * sizeof(float)));
        std::memset(h_logits_, 0, static_cast<size_t>(plan_.logit_rows) * V * sizeof(float));
        gemm_ = std::make_unique<cuda::Gemm>(dev<void>(plan_.workspace), plan_.workspace_bytes);
        sampler_probs_.assign(V, 0.0f);
        sampler_ids_.assign(V, 0);
        repeat_logits_.assign(V, 0.0f);
        repeat_ids_.assign(S, 0);
        history_.assign(S, 0);
        window_.assign(S, 0);
        capture_decode_graph();
    } catch (...) {
        release();
        throw;
    }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
    if (stream_) (void)cudaStreamSynchronize(stream_);
    if (graph_exec_) (void)cudaGraphExecDestroy(graph_exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    gemm_.reset();
    if (stream_) (void)cudaStreamDestroy(stream_);
    if (h_logits_) (void)cudaFreeHost(h_logits_);
    if (h_step_) (void)cudaFreeHost(h_step_);
    if (base_) (void)cudaFree(base_);
    graph_exec_ = nullptr;
    graph_ = nullptr;
    stream_ = nullptr;
    h_logits_ = nullptr;
    h_step_ = nullptr;
    base_ = nullptr;
}

void CudaBackend::capture_decode_graph() {
    // One eager decode step first: it loads every kernel (CUDA's lazy module loading must not
    // happen inside a capture) and checks the launches. It writes cache row 0, which every
    // sequence writes again before reading it.
    // A failing eager step throws (the kernels themselves are broken); a failing capture
    // leaves decode on eager launches, recorded in graph_error_.
    const int token = 0;
    forward(&token, 1, 0, 0, 1, false);
    try {
        EMBER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        try {
            enqueue_forward(1, false);
        } catch (...) {
            cudaGraph_t broken = nullptr;
            (void)cudaStreamEndCapture(stream_, &broken);
            if (broken) (void)cudaGraphDestroy(broken);
            throw;
        }
        EMBER_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph_));
        EMBER_CUDA_CHECK(cudaGraphInstantiateWithFlags(&graph_exec_, graph_, 0));  // CUDA 11.4+
    } catch (const Error& e) {
        graph_error_ = e.what();
        if (graph_exec_) (void)cudaGraphExecDestroy(graph_exec_);
        if (graph_) (void)cudaGraphDestroy(graph_);
        graph_exec_ = nullptr;
        graph_ = nullptr;
        (void)cudaGetLastError();  // a capture error is not sticky; clear it
        forward(&token, 1, 0, 0, 1, false);  // the stream still works (else this throws)
    }
}

std::string CudaBackend::describe() const {
    return graph_exec_ ? "decode: one CUDA graph replay per token"
                       : "decode: CUDA graph NOT captured (" + graph_error_ + "); eager launches";
}

const __half* CudaBackend::f16_weights(const kernels::WeightView& w) {
    if (w.type == kernels::WType::F16) return static_cast<const __half*>(w.data);
    const size_t elems = static_cast<size_t>(w.rows) * w.cols;
    if (elems > plan_.wscratch_elems) fail("CUDA prefill: a [", w.rows, ", ", w.cols, "] weight exceeds the planned scratch of ", plan_.wscratch_elems);
    cuda::dequantize_f16(w, dev<__half>(plan_.wscratch), stream_);
    return dev<__half>(plan_.wscratch);
}

void CudaBackend::linear(const __half* x, int T, const kernels::WeightView& w, const float* b, cuda::Act act, __half* y) {
    if (T == 1) {
        cuda::linear_gemv(x, w, b, act, y, stream_);
        return;
    }
    float* tmp = dev<float>(plan_.gemm_out);
    gemm_->run(x, T, f16_weights(w), w.rows, w.cols, tmp, stream_);
    cuda::linear_epilogue(tmp, T, w.rows, b, act, y, stream_);
}

void CudaBackend::linear(const __half* x, int T, const kernels::WeightView& w, const float* b, bool accumulate, float* y) {
    if (T == 1) {
        cuda::linear_gemv(x, w, b, cuda::Act::None, accumulate, y, stream_);
        return;
    }
    float* tmp = accumulate ? dev<float>(plan_.gemm_out) : y;
    gemm_->run(x, T, f16_weights(w), w.rows, w.cols, tmp, stream_);
    cuda::linear_epilogue(tmp, T, w.rows, b, cuda::Act::None, accumulate, y, stream_);
}

void CudaBackend::enqueue_forward(int T, bool all_rows) {
    const ModelConfig& c = model_.config();
    const int C = c.n_embd, S = c.block_size;
    float* x = dev<float>(plan_.x);
    __half* xn = dev<__half>(plan_.xn);
    __half* qkv = dev<__half>(plan_.qkv);
    __half* att = dev<__half>(plan_.att);
    __half* hidden = dev<__half>(plan_.hidden);
    const int* step = dev<int>(plan_.step);  // pos0, row0, n_keys0
    cuda::embedding(w_.wte, w_.wpe, dev<int>(plan_.ids), step + 0, T, x, stream_);
    cuda::AttentionShape as;
    as.T = T;
    as.n_head = c.n_head;
    as.head_size = c.head_size();
    as.S = S;
    as.ldq = 3 * C;
    as.scale = c.attn_scale;
    const cuda::Act act = cuda::act_of(c.activation);
    for (int l = 0; l < c.n_layer; ++l) {
        const LayerWeights& L = w_.layers[l];
        __half* kc = dev<__half>(plan_.k_cache) + static_cast<size_t>(l) * S * C;
        __half* vc = dev<__half>(plan_.v_cache) + static_cast<size_t>(l) * S * C;
        if (T == 1) {  // decode: LayerNorm fused into the product
            cuda::layernorm_linear_gemv(x, L.ln_1_w, L.ln_1_b, c.ln_eps, L.qkv, L.qkv_b, cuda::Act::None, qkv, stream_);
        } else {
            cuda::layernorm(x, T, C, L.ln_1_w, L.ln_1_b, c.ln_eps, xn, stream_);
            linear(xn, T, L.qkv, L.qkv_b, cuda::Act::None, qkv);
        }
        if (T == 1) {  // stores the new K/V row itself
            cuda::attention_decode(qkv, kc, vc, as, step + 2, step + 1, att, stream_);
        } else {
            cuda::kv_store(qkv, T, C, S, step + 1, kc, vc, stream_);
            cuda::attention_prefill(qkv, kc, vc, as, step + 2, att, stream_);
        }
        linear(att, T, L.proj, L.proj_b, true, x);
        if (T == 1) {
            cuda::layernorm_linear_gemv(x, L.ln_2_w, L.ln_2_b, c.ln_eps, L.fc, L.fc_b, act, hidden, stream_);
        } else {
            cuda::layernorm(x, T, C, L.ln_2_w, L.ln_2_b, c.ln_eps, xn, stream_);
            linear(xn, T, L.fc, L.fc_b, act, hidden);
        }
        linear(hidden, T, L.fc2, L.fc2_b, true, x);
    }
    float* logits = dev<float>(plan_.logits);
    if (all_rows) {
        cuda::layernorm(x, T, C, w_.ln_f_w, w_.ln_f_b, c.ln_eps, xn, stream_);
        linear(xn, T, w_.lm_head, w_.lm_head_b, false, logits);
    } else {
        cuda::layernorm(x + static_cast<size_t>(T - 1) * C, 1, C, w_.ln_f_w, w_.ln_f_b, c.ln_eps, xn, stream_);
        cuda::linear_gemv(xn, w_.lm_head, w_.lm_head_b, cuda::Act::None, false, logits, stream_);
    }
}

const float* CudaBackend::forward(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows) {
    const ModelConfig& c = model_.config();
    const int S = c.block_size;
    check_forward_span("CUDA", T, pos0, row0, n_keys0, all_rows, S, plan_.logit_rows);
    std::memcpy(h_step_ + 4, ids, static_cast<size_t>(T) * sizeof(int));
    h_step_[0] = pos0;
    h_step_[1] = row0;
    h_step_[2] = n_keys0;
    h_step_[3] = T;
    // h_step_ [4 + S] pinned: the step parameters, then the ids (plan_.ids = plan_.step + 4
    // ints): one host-to-device copy per step.
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dev<int>(plan_.step), h_step_, (4 + static_cast<size_t>(T)) * sizeof(int), cudaMemcpyHostToDevice, stream_));
    if (T == 1 && !all_rows && graph_exec_) {
        EMBER_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
    } else {
        enqueue_forward(T, all_rows);
    }
    const size_t rows = all_rows ? T : 1;
    EMBER_CUDA_CHECK(cudaMemcpyAsync(h_logits_, dev<float>(plan_.logits), rows * c.vocab_size * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return h_logits_;
}

}  // namespace ember
