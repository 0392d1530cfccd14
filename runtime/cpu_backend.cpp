#include "runtime/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/lora.h"
#include "runtime/arena.h"
#include "runtime/block.h"
#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember {

int int8_groups_per_row(const Model& model) {
    int groups = 1;
    for_each_linear(model.weights(), [&](const kernels::WeightView& v) {
        if (v.type == kernels::WType::I8) groups = std::max(groups, v.groups_per_row());
    });
    return groups;
}

size_t linear_xf_floats(const Model& model) {
    const ModelConfig& c = model.config();
    bool wide = false;
    for_each_linear(model.weights(), [&](const kernels::WeightView& v) { wide = wide || v.type != kernels::WType::I8; });
    return wide && kernels::linear_uses_xf() ? kernels::linear_scratch_xf_floats(std::max(c.n_embd, c.ffn_hidden)) : 0;
}

int resolve_threads(int requested) {
    if (requested < 0 || requested > kMaxThreads) fail("threads ", requested, " is outside [0, ", kMaxThreads, "] (0 = all cores)");
    return requested > 0 ? requested : kernels::ThreadPool::default_threads();
}

MemoryPlan plan_memory(const Model& model, int threads, bool all_logits, int lora_rank, KvDType kv, int prefill_rows) {
    const ModelConfig& c = model.config();
    if (prefill_rows < 0) fail("prefill rows ", prefill_rows, " must be >= 0 (0 = block_size)");
    const size_t S = c.block_size, C = c.n_embd, F = c.ffn_hidden, V = c.vocab_size, L = c.n_layer;
    MemoryPlan p;
    p.threads = threads;
    p.kv = kv;
    p.logit_rows = all_logits ? c.block_size : 1;
    p.rows = all_logits || prefill_rows == 0 ? c.block_size : std::min(c.block_size, prefill_rows);
    const size_t R = p.rows;
    const int groups = int8_groups_per_row(model);
    ArenaPlanner a(kDataAlignment);
    auto take = [&](size_t bytes) { return a.take(bytes); };
    const size_t f4 = sizeof(float);
    p.x = take(R * C * f4);
    p.xn = take(R * C * f4);
    p.qkv = take(R * 3 * C * f4);
    p.att = take(R * C * f4);
    p.tmp = take(R * C * f4);
    p.hidden = take(R * F * f4);
    p.logits = take(static_cast<size_t>(p.logit_rows) * V * f4);
    p.k_cache = take(L * S * C * kernels::kv_dtype_bytes(kv));
    p.v_cache = take(L * S * C * kernels::kv_dtype_bytes(kv));
    p.scores = take(static_cast<size_t>(threads) * kernels::kAttentionQueryBlock * S * f4);
    p.xq = take(R * std::max(C, F));
    p.xs = take(R * static_cast<size_t>(groups) * f4);
    p.xf_floats = linear_xf_floats(model);
    p.xf = take(static_cast<size_t>(threads) * p.xf_floats * f4);
    p.history = take(S * sizeof(int));
    p.window = take(S * sizeof(int));
    p.sampler_probs = take(V * f4);
    p.sampler_ids = take(V * sizeof(int));
    p.repeat_logits = take(V * f4);
    p.repeat_ids = take(S * sizeof(int));
    p.lora_u = take(R * static_cast<size_t>(lora_rank) * f4);
    p.total = a.total();
    return p;
}

void check_plan_fits(const MemoryPlan& plan, const Model& model, uint64_t limit) {
    const ModelConfig& c = model.config();
    const uint64_t kv = 2 * static_cast<uint64_t>(plan.v_cache - plan.k_cache);
    check_memory(plan.total, limit, printable(model.path(), 200) + ": a session",
                 " (KV cache " + memory_size_text(kv) + " for n_layer " + std::to_string(c.n_layer) + " x block_size " + std::to_string(c.block_size) +
                     " x n_embd " + std::to_string(c.n_embd) + ")");
}

CpuBackend::CpuBackend(const Model& model, const SessionOptions& opts)
    : model_(model),
      opts_(opts),
      pool_(resolve_threads(opts.threads)) {
    if (opts.adapter && opts.adapter->base_checksum() != model.checksum()) fail("the adapter was made for another model than ", model.path());
    plan_ = plan_memory(model, pool_.size(), opts.all_logits, opts.adapter ? opts.adapter->rank() : 0, opts.kv_cache, opts.prefill_rows);
    if (opts.arena) {  // the caller's: checked before anything is written to it
        if (reinterpret_cast<uintptr_t>(opts.arena) % kDataAlignment != 0)
            fail("the arena at ", opts.arena, " is not aligned to ", kDataAlignment, " bytes");
        if (opts.arena_bytes < plan_.total)
            fail("the arena of ", opts.arena_bytes, " bytes is too small: a session of ", printable(model.path(), 200), " on ", pool_.size(),
                 pool_.size() == 1 ? " thread" : " threads", " needs ", plan_.total, " bytes");
        arena_ = static_cast<uint8_t*>(opts.arena);
        std::memset(arena_, 0, plan_.total);  // the caller's memory: zeroed, and its pages touched, here
    } else {
        check_plan_fits(plan_, model, opts.memory_limit);
        own_arena_ = ResidentMemory(plan_.total, "the arena for " + printable(model.path(), 200));  // zeroed by the kernel
        arena_ = own_arena_.data();
    }
}

CpuBackend::~CpuBackend() = default;

HostScratch CpuBackend::host_scratch() {
    return {buf<int>(plan_.history), buf<int>(plan_.window), buf<float>(plan_.sampler_probs), buf<int>(plan_.sampler_ids),
            buf<float>(plan_.repeat_logits), buf<int>(plan_.repeat_ids)};
}

const float* CpuBackend::forward(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows) {
    const ModelConfig& c = model_.config();
    check_forward_span("cpu", T, pos0, row0, n_keys0, all_rows, c.block_size, plan_.logit_rows);
    if (T == 1 && pool_.size() > 1) {
        // A decode step: on the pool or on this thread alone, whichever choice_ measured faster.
        struct Reset {
            kernels::ThreadPool& pool;
            ~Reset() { pool.set_caller_only(false); }  // also when the step throws
        } reset{pool_};
        pool_.set_caller_only(choice_.alone_next());
        const auto t0 = std::chrono::steady_clock::now();
        const float* logits = forward_pass(ids, T, pos0, row0, n_keys0, all_rows, 0);
        choice_.record(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
        return logits;
    }
    if (T <= plan_.rows) return forward_pass(ids, T, pos0, row0, n_keys0, all_rows, 0);
    // More rows than a pass holds (all_rows never: its plan holds block_size): passes of
    // near-equal length, each writing its K and V rows before the next attends to them. Query t
    // of a pass starting at row j sees the keys query j + t of one long pass would.
    const int passes = (T + plan_.rows - 1) / plan_.rows;
    const float* logits = nullptr;
    for (int i = 0, j = 0; i < passes; ++i) {
        const int n = (T - j) / (passes - i);
        logits = forward_pass(ids + j, n, pos0 + j, row0 + j, n_keys0 + j, false, j);
        j += n;
    }
    return logits;
}

const float* CpuBackend::forward_pass(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows, int tap_row0) {
    const ModelConfig& c = model_.config();
    const ModelWeights& w = model_.weights();
    const int C = c.n_embd;
    float* x = buf<float>(plan_.x);
    float* xn = buf<float>(plan_.xn);
    float* qkv = buf<float>(plan_.qkv);
    float* att = buf<float>(plan_.att);
    float* tmp = buf<float>(plan_.tmp);
    float* hidden = buf<float>(plan_.hidden);
    const kernels::LinearScratch scratch{buf<int8_t>(plan_.xq), buf<float>(plan_.xs), buf<float>(plan_.xf), plan_.xf_floats};

    // x = wte[ids] + wpe[positions]
    for (int t = 0; t < T; ++t) embed_row(w, C, ids[t], pos0 + t, x + static_cast<size_t>(t) * C, tmp);
    // One buffer per kind, in place (runtime/block.h).
    BlockBuffers io;
    io.x_in = io.x_mid = io.x_out = x;
    io.xn1 = io.xn2 = xn;
    io.qkv = qkv;
    io.att = att;
    io.hpre = io.hact = hidden;
    io.tmp = tmp;
    for (int l = 0; l < c.n_layer; ++l) {
        auto linear = [&](LoraTarget t, const float* in, const kernels::WeightView& wv, const float* bias, float* out) {
            kernels::linear(in, T, wv, bias, out, scratch, pool_);
            add_lora(l, t, in, T, out);
        };
        auto attend = [&](const float* qkv_rows, float* att_rows) { attend_and_cache(l, qkv_rows, T, row0, n_keys0, tap_row0, att_rows); };
        block_forward(w.layers[l], c, T, io, linear, attend, pool_);
    }
    float* logits = buf<float>(plan_.logits);
    if (all_rows) {
        kernels::layernorm(x, T, C, w.ln_f_w, w.ln_f_b, c.ln_eps, xn, pool_);
        kernels::linear(xn, T, w.lm_head, w.lm_head_b, logits, scratch, pool_);
    } else {
        kernels::layernorm(x + static_cast<size_t>(T - 1) * C, 1, C, w.ln_f_w, w.ln_f_b, c.ln_eps, xn);
        kernels::linear(xn, 1, w.lm_head, w.lm_head_b, logits, scratch, pool_);
    }
    return logits;
}

void CpuBackend::attend_and_cache(int l, const float* qkv, int T, int row0, int n_keys0, int tap_row0, float* att) {
    const ModelConfig& c = model_.config();
    const int C = c.n_embd, S = c.block_size;
    if (l == tap_layer_) {
        if (tap_row0 + T > tap_rows_) fail("cpu: the qkv tap of layer ", l, " holds ", tap_rows_, " rows, the forward has ", tap_row0 + T);
        std::memcpy(tap_dst_ + static_cast<size_t>(tap_row0) * 3 * C, qkv, static_cast<size_t>(T) * 3 * C * sizeof(float));
    }
    kernels::AttentionShape as;
    as.T = T;
    as.n_head = c.n_head;
    as.head_size = c.head_size();
    as.n_keys0 = n_keys0;
    as.ldq = 3 * C;
    as.scale = c.attn_scale;
    const int hs = as.head_size;
    as.kv_row = hs;  // the cache is head-major: [n_head, S, head_size] per layer
    as.kv_head = static_cast<size_t>(S) * hs;
    // the new K and V rows into the cache (rounded to binary16 for an f16 cache), then attention
    const size_t layer_off = static_cast<size_t>(l) * S * C;
    // store(src, dst, n) writes n floats of one head's K or V row into the cache, of either element type
    auto store_then_attend = [&](auto* kc, auto* vc, auto store) {
        for (int t = 0; t < T; ++t) {
            const float* row = qkv + static_cast<size_t>(t) * 3 * C;
            for (int h = 0; h < c.n_head; ++h) {
                const size_t at = h * as.kv_head + static_cast<size_t>(row0 + t) * hs;
                store(row + C + h * hs, kc + at, hs);
                store(row + 2 * C + h * hs, vc + at, hs);
            }
        }
        kernels::attention(qkv, kc, vc, as, att, buf<float>(plan_.scores), kernels::kAttentionQueryBlock * S, pool_);
    };
    if (plan_.kv == KvDType::F16) {
        store_then_attend(buf<uint16_t>(plan_.k_cache) + layer_off, buf<uint16_t>(plan_.v_cache) + layer_off,
                          [](const float* src, uint16_t* dst, int n) { kernels::kv_round_f16(src, dst, n); });
    } else {
        store_then_attend(buf<float>(plan_.k_cache) + layer_off, buf<float>(plan_.v_cache) + layer_off,
                          [](const float* src, float* dst, int n) { std::memcpy(dst, src, n * sizeof(float)); });
    }
}

void CpuBackend::set_qkv_tap(int layer, float* dst, int max_rows) {
    if (layer >= model_.config().n_layer || (layer >= 0 && (!dst || max_rows < 1)))
        fail("cpu: qkv tap for layer ", layer, " (n_layer ", model_.config().n_layer, ") with ", max_rows, " rows");
    tap_layer_ = layer < 0 ? -1 : layer;
    tap_dst_ = dst;
    tap_rows_ = max_rows;
}

void CpuBackend::add_lora(int layer, LoraTarget t, const float* x, int T, float* y) {
    const LoraAdapter* a = opts_.adapter;
    if (!a) return;
    kernels::LoraShape s;
    s.T = T;
    s.K = a->in_features(t);
    s.N = a->out_features(t);
    s.r = a->rank();
    s.scale = a->scale();
    kernels::lora_forward(x, a->A(layer, t), a->B(layer, t), s, buf<float>(plan_.lora_u), y, pool_);
}

}  // namespace ember
