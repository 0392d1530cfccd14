// A generation session on the CPU backend: one memory plan sized at construction, a KV ring
// of block_size slots per layer, and the three context policies of the design:
//   exact (default): the window is the last block_size tokens at positions 0..S-1, what
//          gpt.py's generate computes; once the sequence outgrows S, each step recomputes
//          the window as a prefill (learned positions make cached K/V stale when it slides).
//   shift: when full, keep the newest S/2 tokens, recompute them at positions 0..S/2-1,
//          go on appending.
//   ring:  overwrite the oldest slot and keep stale K/V; every token after the wrap takes
//          position S-1; O(1) per token, approximate.
// After construction nothing is allocated: append() and forward_window() run in the arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/generator.h"
#include "runtime/adapter.h"
#include "runtime/context.h"
#include "runtime/memory.h"
#include "runtime/model.h"

namespace ember {


struct SessionOptions {
    int threads = 0;                  // 0 = all cores; at most 256
    ContextPolicy policy = ContextPolicy::Exact;
    bool all_logits = false;          // plan [S, V] logits for forward_window (eval)
    const LoraAdapter* adapter = nullptr;  // LoRA on qkv/proj/fc/fc2, unmerged; must outlive the session
    uint64_t memory_limit = 0;        // bytes the arena may take; 0 = available_memory_bytes()
};


// Byte offsets of every buffer in the one arena (64-byte aligned), and its total size.
struct MemoryPlan {
    size_t x = 0, xn = 0, qkv = 0, att = 0, tmp = 0, hidden = 0;  // activations, rows of S
    size_t logits = 0;         // [logit_rows, V]
    size_t k_cache = 0, v_cache = 0;  // [L, S, C] each
    size_t scores = 0;         // [threads, S]
    size_t xq = 0, xs = 0;     // int8 activations [S, max(C, F)] and their scales
    size_t history = 0;        // [S] token ids: token k at k mod S
    size_t window = 0;         // [S] token ids of a recomputed window, oldest first
    size_t sampler_probs = 0;  // [V]
    size_t sampler_ids = 0;    // [V]
    size_t lora_u = 0;         // [S, r] LoRA's A x (0 bytes without an adapter)
    size_t total = 0;
    int logit_rows = 1;
    int threads = 1;
};

// Plans the arena for `model` with `threads` threads (and LoRA rank, 0 = no adapter).
// Pure arithmetic on the configuration.
MemoryPlan plan_memory(const Model& model, int threads, bool all_logits, int lora_rank = 0);

// check_memory for a session's arena: a small file may claim a block_size whose KV cache and
// activations no device holds.
void check_plan_fits(const MemoryPlan& plan, const Model& model, uint64_t limit);

class Session : public Generator {  // the CPU backend (generator.h)
public:
    // Plans and allocates the arena, starts the thread pool. Throws ember::Error.
    Session(const Model& model, const SessionOptions& opts);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Forgets the sequence.
    void reset();

    // Appends ids [n] to the sequence under the context policy; afterwards logits() holds the
    // next-token logits [V] after the last id. Ids must be in [0, V) (else ember::Error).
    void append(const int* ids, int n);
    const float* logits() const;

    // Eval: runs ids [T] (1 <= T <= S) from an empty cache at positions 0..T-1 and returns
    // logits [T, V] for every position. Needs SessionOptions::all_logits. Resets the sequence.
    const float* forward_window(const int* ids, int T);

    int64_t tokens_seen() const { return ctx_.tokens_seen(); }
    const MemoryPlan& plan() const { return plan_; }
    int threads() const { return pool_.size(); }
    float* sampler_probs() const;  // [V] scratch for a Sampler
    int* sampler_ids() const;      // [V]

private:
    // Runs ids [T] at positions pos0.., writing K/V to cache rows row0..row0+T-1; query t
    // sees rows [0, n_keys0 + t). Logits for the last row, or all rows.
    void forward(const int* ids, int T, int pos0, int row0, int n_keys0, bool all_rows);
    // y [T, out] += adapter's scale * B (A x) for target t of layer l (no-op without adapter).
    void add_lora(int layer, LoraTarget t, const float* x, int T, float* y);
    template <typename T>
    T* buf(size_t off) const { return reinterpret_cast<T*>(arena_ + off); }

    const Model& model_;
    SessionOptions opts_;
    MemoryPlan plan_;
    kernels::ThreadPool pool_;
    uint8_t* arena_ = nullptr;
    ContextWindow ctx_{ContextPolicy::Exact, 1, nullptr, nullptr};  // set once the arena exists
    int last_logits_row_ = 0;
};

}  // namespace ember
