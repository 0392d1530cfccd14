// The attention probe: one layer's softmax attention weights for a prompt, the lecture's `wei`
// (gpt.py, Head.forward: wei = q @ k.transpose(-2, -1) * head_size**-0.5;
// wei = wei.masked_fill(tril[:T, :T] == 0, float('-inf')); wei = softmax(wei, dim=-1)), for
// every head of the layer; nanoGPT's CausalSelfAttention computes the same `att`. The scale is
// the model file's (ModelConfig::attn_scale).
//
// How: a prefill of the prompt at positions 0..T-1 on a CPU backend of its own, whose qkv tap
// (CpuBackend::set_qkv_tap) copies the layer's q and k as the runtime computes them (int8
// kernels and a LoRA adapter included); the probabilities are then recomputed from them in
// double, with the causal mask. q and k are f32 (what an f32 KV cache holds; the f16 cache's
// rounding of k is not applied). Generation never runs this code: the tap is off there.
//
// Letters: T prompt tokens (1 <= T <= block_size), H n_head.
#pragma once

#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/tokenizer.h"

namespace ember {

struct AttentionWeights {
    int layer = 0;
    int n_head = 0;
    int T = 0;
    std::vector<float> wei;  // [H, T, T]: head h, row t = query t, column j = key j; 0 for j > t
    const float* head(int h) const { return wei.data() + static_cast<size_t>(h) * T * T; }
};

// wei of every head of `layer` (0-based) for ids [T] from an empty context. opts: threads and
// adapter are used; the KV cache is f32, one logits row. Throws ember::Error: layer outside
// [0, n_layer), an empty prompt, T > block_size (the message gives T and block_size: the
// probe shows one window, it never slides one), an id outside [0, vocab_size).
AttentionWeights attention_weights(const Model& model, const std::vector<int>& ids, int layer, const SessionOptions& opts = {});

// The bytes of token `id` for a label: printable UTF-8 as it is; \n \t \r and \\ escaped;
// other control characters and bytes that are not UTF-8 (part of a character in a BPE
// token) as \xNN.
std::string token_label(const Tokenizer& tok, int id);

// The text `ember attn` and the console's `attn` print for head h of w: a header line, then
// one line per query t: t, the query token, and its `top` strongest keys (weight descending,
// earlier key first on a tie) as j 'token' weight (3 decimals). labels [T] from token_label.
std::string attention_text(const AttentionWeights& w, const std::vector<std::string>& labels, int h, int top);

}  // namespace ember
