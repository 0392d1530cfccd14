// A generation session: the one way every front end (ember generate/eval/bench/finetune,
// ember-console, the C API of include/ember/ember.h) runs a model. It owns the context policy
// (context.h: exact / shift / ring over a KV ring of block_size slots), the sampler and the
// generate loop, over a Backend (backend.h) that runs the network: the CPU backend
// (cpu_backend.h) or the CUDA module (cuda_module.h), chosen by make_session.
// After construction nothing is allocated: append(), forward_window() and generate() run in
// the backend's planned arena.
// Letters: V vocab_size, S block_size, T window length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cpu/kv_dtype.h"
#include "runtime/backend.h"
#include "runtime/context.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace ember {

using kernels::KvDType;

class LoraAdapter;
class StopStrings;
class Tokenizer;
class Utf8Stream;

struct SessionOptions {
    int threads = 0;                  // CPU threads: 0 = all cores; at most 256
    ContextPolicy policy = ContextPolicy::Exact;
    bool all_logits = false;          // plan [S, V] logits for forward_window (eval)
    // Rows of one prefill pass on the CPU backend, for an embedder short of memory: the arena
    // holds the activations of this many rows ([rows, 7 n_embd + ffn_hidden] f32 and more), and
    // a longer prompt (or the exact policy's recomputed window) runs in passes of near-equal
    // length, with the same results up to f32 rounding. 0 (the default) = block_size, one
    // pass; larger values are capped at block_size; all_logits plans block_size rows. GPT-2
    // 124M int8 (block_size 1024; 37,056 bytes a row) on the 2-vCPU EPYC, 2 threads: 512 rows
    // take 19.0 MB off its 76.5 MB arena for 0.97x the prefill of a 1024-token prompt, 256
    // rows 28.5 MB for 0.91x (docs/benchmarks.md).
    int prefill_rows = 0;
    KvDType kv_cache = KvDType::F16;  // the CPU backend's KV cache (the CUDA backend's is always fp16)
    const LoraAdapter* adapter = nullptr;  // LoRA on qkv/proj/fc/fc2, unmerged (CPU only); must outlive the session
    uint64_t memory_limit = 0;        // bytes the arena may take; 0 = available_memory_bytes()
    // A caller-owned arena for the CPU backend (TFLM's tensor arena): arena_bytes at arena,
    // 64-byte aligned, at least plan_memory(...).total; nullptr = the backend allocates one.
    void* arena = nullptr;
    size_t arena_bytes = 0;
};

struct GenerateResult {
    int tokens = 0;        // tokens sampled
    bool stopped = false;  // should_stop() ended it early
    int stop = -1;         // the index of the stop string (StopStrings) that ended it, -1: none
    double first_token_s = 0.0;  // seconds from the call to the first token sampled
    double seconds = 0.0;        // seconds from the call to the last token sampled
};

// n, the ids of a prompt, as the int that Session::append takes. More than INT_MAX ids (over
// 2 GiB of text, through the C API: the programs read files up to 1 GiB) throws ember::Error
// naming the limit: the cast used to wrap to a negative or small count.
int prompt_length(size_t n);

class Session {
public:
    // Over a backend made for `model` (make_session below picks one). Throws ember::Error.
    Session(const Model& model, const SessionOptions& opts, std::unique_ptr<Backend> backend);
    // On the CPU backend.
    Session(const Model& model, const SessionOptions& opts);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Forgets the sequence.
    void reset();
    // Appends ids [n] under the context policy; afterwards logits() holds the next-token
    // logits [V] after the last id. Ids outside [0, V) throw ember::Error.
    void append(const int* ids, int n);
    // The same for a whole prompt: more than INT_MAX ids throws (see prompt_length).
    void append(const std::vector<int>& ids) { append(ids.data(), prompt_length(ids.size())); }
    const float* logits() const { return logits_; }
    // Eval: ids [T] (1 <= T <= S) from an empty cache at positions 0..T-1; returns logits
    // [T, V]. Needs SessionOptions::all_logits. Resets the sequence.
    const float* forward_window(const int* ids, int T);
    int64_t tokens_seen() const { return ctx_.tokens_seen(); }
    // Token rows run through the model by append() since the session was made: fewer than
    // the tokens appended where the context policy dropped some (exact keeps the last
    // block_size of a longer prompt), more where it recomputes a window.
    int64_t rows_run() const { return rows_run_; }

    // The generate loop of `ember generate`, the console's `gen` and ember_generate: n times,
    // sample a token from logits() (only ids below tok.size(): padding rows of the logits are
    // never drawn), pass its bytes through `stream` (whole UTF-8 characters) to on_text,
    // append it (not after the last). should_stop (may be empty) is polled before each token.
    // At the end, a Ctrl-C included, the stream's incomplete tail (U+FFFD) goes to on_text.
    // The repetition penalty (sampling.repeat_penalty, sampler.h) looks at the last
    // repeat_last_n ids appended, the prompt's included. With `stops` (may be null; reset
    // here), the text passes through it: generation ends with the token that completes a
    // stop string, and the stop string is not passed to on_text.
    // The sequence must be started first (append the prompt ids). Allocates nothing per token.
    // A logit among the first tok.size() that is not finite throws ember::Error naming the token
    // and the logit, as eval refuses it (the model overflows), after the text made until then.
    GenerateResult generate(int n, const SamplerOptions& sampling, const Tokenizer& tok, Utf8Stream& stream,
                            const std::function<void(std::string_view)>& on_text,
                            const std::function<bool()>& should_stop = {}, StopStrings* stops = nullptr);
    // Tokens the last generate() sampled, also when it threw part way (a logit not finite, an
    // exception from on_text): their text went to on_text before the throw.
    int tokens_generated() const { return generated_; }

    // [V] scratch for a Sampler.
    float* sampler_probs() const { return scratch_.sampler_probs; }
    int* sampler_ids() const { return scratch_.sampler_ids; }
    Backend& backend() const { return *backend_; }
    const Model& model() const { return model_; }

private:
    const Model& model_;
    SessionOptions opts_;
    std::unique_ptr<Backend> backend_;
    HostScratch scratch_;
    ContextWindow ctx_{ContextPolicy::Exact, 1, nullptr, nullptr};
    const float* logits_ = nullptr;
    int64_t rows_run_ = 0;
    int generated_ = 0;
};

// Cpu or Cuda: Auto is Cuda when a GPU device node exists, the CUDA module loads and finds a
// device; else Cpu, without a word. With an adapter (LoRA runs on the CPU) or a caller-owned
// arena (SessionOptions::arena, CPU memory) Auto is Cpu.
BackendKind resolve_backend(BackendKind b, const SessionOptions& opts = {});
// A session for `model` on `backend`. Throws ember::Error, e.g. for Cuda: the module cannot
// be loaded, "no CUDA device found", or an adapter (CPU only).
std::unique_ptr<Session> make_session(const Model& model, const SessionOptions& opts, BackendKind backend);

}  // namespace ember
