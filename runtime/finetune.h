// On-device fine-tuning: LoRA adapters (runtime/adapter.h) trained on the frozen base model
// with a full backward pass, AdamW and gradient-norm clipping, on the CPU.
//
// Dimension letters: B batch, T sequence length (<= block_size), M = B * T rows, C n_embd,
// F ffn_hidden, V vocab_size, L n_layer, r LoRA rank, P LoRA values.
//
// The training forward runs the inference forward's block (runtime/block.h, which
// CpuBackend::forward_pass runs too) on M rows: the same kernels (int8 bases quantize
// activations to int8 exactly as generation does), f32 activations, saved per layer for the
// backward, and K and V kept in f32 (inference's default f16 KV cache rounds them;
// tests/test_lora.cpp compares the two with an f32 cache). The backward reaches the LoRA values
// through cross-entropy, lm_head, ln_f, every block's residual stream, LayerNorm, causal
// attention, ReLU/GELU and the frozen linears (input gradient, weights dequantized a row at
// a time). Base weights, biases and embeddings receive no gradient.
//
// Memory: one arena planned at construction (plan_training) holds every activation, the
// gradients and the scratch; the adapter holds the values and AdamW moments. A step
// allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/lora.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/adapter.h"
#include "runtime/model.h"
#include "runtime/memory.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"

namespace ember {

// Byte offsets of the training arena (64-byte aligned) and its total.
struct TrainPlan {
    size_t x = 0;        // [L + 1, M, C] residual stream: input of each block, then of ln_f
    size_t xn1 = 0;      // [L, M, C] ln_1 out
    size_t qkv = 0;      // [L, M, 3C]
    size_t att = 0;      // [L, M, C] attention out (proj's input)
    size_t x_mid = 0;    // [L, M, C] residual after attention (ln_2's input)
    size_t xn2 = 0;      // [L, M, C] ln_2 out
    size_t h_pre = 0;    // [L, M, F] fc out, before the activation
    size_t h_act = 0;    // [L, M, F] after the activation (fc2's input)
    size_t u = 0;        // [L, 4, M, r] A x of each adapted layer
    size_t xnf = 0;      // [M, C] ln_f out
    size_t logits = 0;   // [M, V], then d loss / d logits
    size_t dx = 0;       // [M, C] gradient of the residual stream
    size_t dtmp = 0;     // [M, C]
    size_t datt = 0;     // [M, C]
    size_t dqkv = 0;     // [M, 3C]
    size_t dh = 0;       // [M, F]
    size_t du = 0;       // [M, r]
    size_t kc = 0, vc = 0;       // [T, C] one sequence's keys and values for the attention kernel
    size_t scores = 0;   // [threads, 2T]
    size_t rows = 0;     // [threads, max(C, F)] dequantized weight rows
    size_t xq = 0, xs = 0;  // int8 activations [M, max(C, F)] and their scales [M, groups]
    size_t xf = 0, xf_floats = 0;  // f32 / f16 weights: [threads, xf_floats] (linear_xf_floats)
    size_t grads = 0;    // [P]
    size_t total = 0;
};

// Pure arithmetic on the configuration.
TrainPlan plan_training(const Model& model, int batch, int seq, int rank, size_t n_params, int threads);

// Result of one optimizer step.
struct StepResult {
    double loss = 0.0;       // mean cross-entropy of the batch (nats/token), before the update
    double grad_norm = 0.0;  // ||g||_2 before clipping
    bool skipped = false;    // non-finite loss or gradient: no update was made
};

class Trainer {
public:
    // adapter: for `model`, outliving the trainer; its AdamW moments are zero-filled here
    // unless they already hold adapter.size() values (a resumed run). 1 <= seq <= block_size,
    // batch >= 1. Throws ember::Error.
    Trainer(const Model& model, LoraAdapter& adapter, int batch, int seq, const kernels::AdamWParams& adamw, float clip,
            int threads);
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // Forward and backward on inputs x and targets y [B, T] (ids checked); grads() then holds
    // d loss / d value for every adapter value. Returns the mean loss. Changes no value.
    double forward_backward(const int* x, const int* y);
    // Forward only: the mean loss of the batch.
    double loss(const int* x, const int* y);

    // forward_backward, then, when loss and gradient are finite: clip to max norm `clip`
    // (0 = off), one AdamW step (adapter.train.adam_step + 1). Otherwise nothing changes.
    StepResult step(const int* x, const int* y);

    const float* grads() const;  // [P]
    const TrainPlan& plan() const { return plan_; }
    int batch() const { return B_; }
    int seq() const { return T_; }
    int threads() const { return pool_.size(); }

private:
    void check_ids(const int* ids) const;
    // The batch's forward and loss (every layer's activations kept in the arena); logits then
    // hold d loss / d logits [M, V], M = B * T. With backward, the adapter's gradients too.
    double forward(const int* x, const int* y, bool backward);
    // The backward from those logits: d loss / d every A and B into the grads buffer.
    void backward();
    // LoRA's u = x A^T of layer l's target t, kept by the forward for the backward: [M, r].
    float* lora_u(int l, LoraTarget t) const;
    kernels::LoraShape lora_shape(LoraTarget t) const;  // that target's [M, K] -> [M, N] at rank r
    template <typename T>
    T* buf(size_t off) const { return reinterpret_cast<T*>(arena_ + off); }

    const Model& model_;
    LoraAdapter& adapter_;
    int B_, T_;
    kernels::AdamWParams adamw_;
    float clip_;
    kernels::ThreadPool pool_;
    TrainPlan plan_;
    ResidentMemory own_arena_;
    uint8_t* arena_ = nullptr;
};

// Random training windows: batch k takes B windows of T + 1 consecutive ids at offsets drawn
// from a counter-based generator of (seed, k, b) alone, so any step's batch is reproduced
// without replaying the ones before it (what makes a resumed run exact).
class BatchSampler {
public:
    // ids [n] with n >= T + 1 (else ember::Error). Keeps a pointer to ids.
    BatchSampler(const int* ids, int64_t n, int batch, int seq, uint64_t seed);
    // x, y [B, T]: y is x shifted by one.
    void fill(uint64_t step, int* x, int* y) const;

private:
    const int* ids_;
    int64_t n_;
    int B_, T_;
    uint64_t seed_;
};

// Text -> ids for training. Characters outside the vocabulary throw ember::Error naming
// them (each distinct one with its count) unless skip_unknown, which drops them and counts
// them in *skipped; a text whose every character was dropped throws.
std::vector<int> encode_training_text(const CharTokenizer& tok, std::string_view text, const std::string& what,
                                      bool skip_unknown, int64_t* skipped);

// Text -> ids with the model's own tokenizer: a char model as above; a byte-level BPE model
// encodes any UTF-8 text (no character is unknown, so skip_unknown changes nothing and
// *skipped is 0). Throws ember::Error (invalid UTF-8 with its byte offset, unknown characters).
std::vector<int> encode_training_text(const Model& model, std::string_view text, const std::string& what, bool skip_unknown,
                                      int64_t* skipped);

// XXH64 of ids as int32 little-endian (the identity of a training text in an adapter file).
uint64_t ids_checksum(const std::vector<int>& ids);

struct FinetuneOptions {
    int rank = 8;
    float alpha = 16.0f;
    int batch = 8;           // B
    int seq = 0;             // T; 0 = block_size
    int64_t steps = 300;     // total steps (a resumed run goes on up to this many)
    float lr = 2e-3f;
    float weight_decay = 0.01f;
    float clip = 1.0f;       // max gradient norm; 0 = off
    uint64_t seed = 1337;
    int eval_every = 50;     // validation loss and an adapter checkpoint every K steps
    int threads = 0;         // 0 = all cores
};

// What the caller sees after each step.
struct FinetuneProgress {
    int64_t step = 0;          // steps done (1-based after the first)
    int64_t steps = 0;         // the target
    StepResult result;
    double val_loss = -1.0;    // held-out loss when evaluated at this step, else < 0
    double tokens_per_s = 0.0; // training tokens (B * T per step) per second of step time in this run
    bool saved = false;        // the adapter file was written after this step
};

// A fine-tuning run over one text: the first 90% trains, the last 10% (val_split_start)
// is held out. It owns the trainer and an eval session; a console or the CLI drives it.
class FinetuneRun {
public:
    // adapter: fresh (initialized here from opts.seed) or loaded with its training state
    // (resume: batch, seq, seed, lr, weight decay and clip come from it, and the text must
    // be the same). text_name names the text in errors ("alice.txt: the text holds 3 tokens:
    // ..."). Throws ember::Error.
    FinetuneRun(const Model& model, LoraAdapter& adapter, std::vector<int> ids, const FinetuneOptions& opts,
                const std::string& text_name = "the text");

    // Mean cross-entropy of the held-out tail with the current adapter (ember eval's definition).
    double validation_loss();

    // Tokens per second of the last validation_loss(), a forward pass only (0 before one). A
    // training step runs forward and backward over batch x seq tokens, so batch x seq / this
    // is a floor on a step's time (in seconds: step_seconds_floor(), 0 before a validation).
    double forward_tokens_per_s() const { return forward_tps_; }
    double step_seconds_floor() const;
    // A big step runs long before its progress line (the shipped model, batch 1024 x seq 128:
    // 14.6 s on 2 EPYC cores, where the floor said 2.1 s): the front ends print long_step_note()
    // before the first step. "" when the floor is under min_seconds, else "step K trains B x T
    // = N tokens: a forward pass alone over them takes S s here (...), a training step several
    // times that".
    static constexpr double kLongStepSeconds = 2.0;
    std::string long_step_note(double min_seconds = kLongStepSeconds) const;

    // Steps until opts.steps or until *stop becomes true (checked between steps); calls
    // on_step after each; checks out_path first (output_target: a bad path fails before any
    // work) and writes the adapter there every eval_every steps and at the end (after a stop
    // too). Returns the steps done. Divergence (an lr too high) throws ember::Error, leaving at
    // out_path the last adapter this run wrote, or, when it wrote none, what was there before
    // (an older adapter stays whole): an adapter whose validation loss is not finite is never
    // written, and kMaxSkippedInARow steps in a row with a non-finite loss or gradient (each
    // skipped, Trainer::step) end the run at once.
    int64_t run(const std::string& out_path, const std::function<void(const FinetuneProgress&)>& on_step,
                const std::atomic<bool>* stop);

    static constexpr int kMaxSkippedInARow = 20;

    int64_t step() const { return static_cast<int64_t>(adapter_.train.step); }
    int64_t train_tokens() const { return split_; }
    int64_t val_tokens() const { return static_cast<int64_t>(ids_.size()) - split_; }
    const FinetuneOptions& options() const { return opts_; }
    Trainer& trainer() { return *trainer_; }

private:
    const Model& model_;
    LoraAdapter& adapter_;
    std::vector<int> ids_;
    int64_t split_ = 0;
    FinetuneOptions opts_;
    std::unique_ptr<Trainer> trainer_;
    std::unique_ptr<BatchSampler> sampler_;
    std::unique_ptr<Session> eval_session_;
    std::vector<int> x_, y_;  // [B, T]
    double forward_tps_ = 0.0;
    // Writes the adapter to out_path if its validation loss (returned) is finite; else throws,
    // naming the last step written (*saved_step, -1: none in this run).
    double save_if_finite(const std::string& out_path, int64_t* saved_step, double* saved_val);
};

}  // namespace ember
