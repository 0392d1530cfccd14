// The CPU backend (backend.h): fp32 arithmetic on f32 / f16 / int8 weights with the kernels of
// kernels/cpu, a thread pool, and one arena planned at construction (plan_memory) that holds
// the KV cache, the activations, the logits and the Session's host scratch. After construction
// nothing is allocated: forward() runs in the arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_choice.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/backend.h"
#include "runtime/adapter.h"
#include "runtime/context.h"
#include "runtime/session.h"
#include "runtime/memory.h"
#include "runtime/model.h"

namespace ember {



// Byte offsets of every buffer in the one arena (64-byte aligned), and its total size.
struct MemoryPlan {
    size_t x = 0, xn = 0, qkv = 0, att = 0, tmp = 0, hidden = 0;  // activations, [rows, ...]
    size_t logits = 0;         // [logit_rows, V]
    size_t k_cache = 0, v_cache = 0;  // [L, n_head, S, head_size] each, of kv (f16: binary16 bits)
    size_t scores = 0;         // [threads, kAttentionQueryBlock * S]: the four-query prefill loops' rows (attention.h)
    size_t xq = 0, xs = 0;     // int8 activations [rows, max(C, F)] and their scales
    size_t xf = 0;             // f32 / f16 weights: [threads, xf_floats] packed x (kernels/cpu/linear.h)
    size_t xf_floats = 0;      // per thread; 0 for a model of int8 weights only
    size_t history = 0;        // [S] token ids: token k at k mod S
    size_t window = 0;         // [S] token ids of a recomputed window, oldest first
    size_t sampler_probs = 0;  // [V]
    size_t sampler_ids = 0;    // [V]
    size_t repeat_logits = 0;  // [V] the logits with the repetition penalty
    size_t repeat_ids = 0;     // [S] the recent ids it looks at
    size_t lora_u = 0;         // [rows, r] LoRA's A x (0 bytes without an adapter)
    size_t total = 0;
    int rows = 1;              // rows of one forward pass: block_size with all_logits, else prefill_rows
    int logit_rows = 1;
    int threads = 1;
    KvDType kv = KvDType::F16;
};

// CPU threads for a request: 0 = all cores (ThreadPool::default_threads), else 1..256.
// Throws ember::Error naming the value outside [0, 256].
constexpr int kMaxThreads = 256;
int resolve_threads(int requested);

// LinearScratch::xf floats per thread that `model`'s linear layers need: 0 where all are int8,
// or where the CPU's kernels read none (kernels/cpu/linear.h: linear_uses_xf).
size_t linear_xf_floats(const Model& model);

// The most int8 groups in a row of `model`'s linear weights (qkv, proj, fc, fc2, lm_head; 1
// where none is int8): the width of the int8 activations' scales, xs [rows, groups].
int int8_groups_per_row(const Model& model);

// Plans the arena for `model` with `threads` threads (and LoRA rank, 0 = no adapter; the KV
// cache's element type, SessionOptions' default unless given; the rows of a prefill pass,
// SessionOptions::prefill_rows). Pure arithmetic on the configuration (ArenaPlanner, 64-byte
// aligned regions). Throws ember::Error for prefill_rows < 0.
MemoryPlan plan_memory(const Model& model, int threads, bool all_logits, int lora_rank = 0,
                       KvDType kv = SessionOptions{}.kv_cache, int prefill_rows = 0);

// check_memory for a session's arena: a small file may claim a block_size whose KV cache and
// activations no device holds.
void check_plan_fits(const MemoryPlan& plan, const Model& model, uint64_t limit);

class CpuBackend : public Backend {
public:
    // Plans the arena (or takes opts.arena), starts the thread pool. Throws ember::Error: an
    // adapter made for another model, an arena over the memory limit, a caller's arena that is
    // too small or misaligned (nothing is written to it then).
    CpuBackend(const Model& model, const SessionOptions& opts);
    ~CpuBackend() override;
    CpuBackend(const CpuBackend&) = delete;
    CpuBackend& operator=(const CpuBackend&) = delete;

    const float* forward(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows) override;
    HostScratch host_scratch() override;
    const char* name() const override { return "cpu"; }
    int threads() const override { return pool_.size(); }
    DispatchCounts dispatch_counts() const override { return {pool_.dispatches(), pool_.solo_dispatches()}; }
    size_t arena_bytes() const override { return plan_.total; }
    const MemoryPlan& plan() const { return plan_; }
    // The attention probe's tap (runtime/attention_probe.h): while layer >= 0, forward() copies
    // that layer's fused qkv rows [T, 3C] (q | k | v, heads in order; LoRA included; before
    // attention) to dst, which holds max_rows * 3C floats; a forward of more rows throws
    // ember::Error. layer -1 (the default) = off: the normal path pays one compare per layer.
    void set_qkv_tap(int layer, float* dst, int max_rows);

private:
    // forward() for T <= plan_.rows; the qkv tap's rows start at tap_row0.
    const float* forward_pass(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows, int tap_row0);
    // y [T, out] += adapter's scale * B (A x) for target t of layer l (no-op without adapter).
    void add_lora(int layer, LoraTarget t, const float* x, int T, float* y);
    // Layer l's attention for the block (runtime/block.h): the T new K and V rows of qkv
    // [T, 3C] into the KV cache at rows row0.., then att [T, C] over n_keys0.. keys per query;
    // the qkv tap's copy first.
    void attend_and_cache(int l, const float* qkv, int T, int row0, int n_keys0, int tap_row0, float* att);
    template <typename T>
    T* buf(size_t off) const { return reinterpret_cast<T*>(arena_ + off); }

    const Model& model_;
    SessionOptions opts_;
    MemoryPlan plan_;
    kernels::ThreadPool pool_;
    kernels::ThreadChoice choice_;  // decode steps: the pool or this thread alone
    ResidentMemory own_arena_;    // the arena, unless the caller gave one (SessionOptions::arena)
    uint8_t* arena_ = nullptr;
    int tap_layer_ = -1;          // set_qkv_tap
    float* tap_dst_ = nullptr;    // [tap_rows_, 3C]
    int tap_rows_ = 0;
};

}  // namespace ember
