// One transformer block's forward on the CPU, and the embedding row before the first, shared
// by inference (CpuBackend::forward_pass) and fine-tuning (Trainer::forward), so that each is
// written once. Pre-LayerNorm, as
// gpt.py's Block, nanoGPT's Block and Hugging Face's GPT2Block compute it, on M rows:
//   xn1 = ln_1(x_in)                  qkv = xn1 Wqkv^T + b (+ LoRA)
//   att = attend(qkv)                 x_mid = x_in + (att Wproj^T + b (+ LoRA))
//   xn2 = ln_2(x_mid)                 hpre = xn2 Wfc^T + b (+ LoRA);  hact = activation(hpre)
//   x_out = x_mid + (hact Wfc2^T + b (+ LoRA))
// Shapes: x_in, xn1, att, x_mid, xn2, tmp, x_out [M, C]; qkv [M, 3C]; hpre, hact [M, F].
// Where each goes is the caller's: inference runs in place (x_in == x_mid == x_out, xn1 ==
// xn2, hpre == hact) in one buffer per kind; training keeps each layer's for the backward.
// The caller also gives:
//   linear(target, in, W, bias, out)  out [M, N] = in W^T + bias, plus the adapter's LoRA
//                                     term for `target` where one is applied
//   attend(qkv, att)                  the block's causal attention, att [M, C] from qkv [M, 3C]
//                                     (its K and V rows into a KV cache, or not)
#pragma once

#include <cstddef>
#include <cstring>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/weights.h"
#include "runtime/adapter.h"
#include "runtime/model.h"

namespace ember {

struct BlockBuffers {
    const float* x_in = nullptr;
    float *xn1 = nullptr, *qkv = nullptr, *att = nullptr, *x_mid = nullptr, *xn2 = nullptr;
    float *hpre = nullptr, *hact = nullptr, *tmp = nullptr, *x_out = nullptr;
};

// The input of the first block for one row, as gpt.py's token_embedding_table(idx) +
// position_embedding_table(pos) and nanoGPT's wte(idx) + wpe(pos):
//   x [C] = wte[token] + wpe[pos]      tmp [C]: scratch (wpe's row, dequantized)
// token < vocab_size and pos < block_size are the caller's to check.
inline void embed_row(const ModelWeights& w, int C, int token, int pos, float* x, float* tmp) {
    kernels::dequantize_row(w.wte, token, x);
    kernels::dequantize_row(w.wpe, pos, tmp);
    for (int i = 0; i < C; ++i) x[i] += tmp[i];
}

template <class Linear, class Attend>
void block_forward(const LayerWeights& L, const ModelConfig& c, int M, const BlockBuffers& b, Linear&& linear, Attend&& attend,
                   kernels::ThreadPool& pool) {
    const size_t MC = static_cast<size_t>(M) * c.n_embd, MF = static_cast<size_t>(M) * c.ffn_hidden;
    kernels::layernorm(b.x_in, M, c.n_embd, L.ln_1_w, L.ln_1_b, c.ln_eps, b.xn1, pool);
    linear(LoraTarget::Qkv, b.xn1, L.qkv, L.qkv_b, b.qkv);
    attend(b.qkv, b.att);
    linear(LoraTarget::Proj, b.att, L.proj, L.proj_b, b.tmp);
    for (size_t i = 0; i < MC; ++i) b.x_mid[i] = b.x_in[i] + b.tmp[i];
    kernels::layernorm(b.x_mid, M, c.n_embd, L.ln_2_w, L.ln_2_b, c.ln_eps, b.xn2, pool);
    linear(LoraTarget::Fc, b.xn2, L.fc, L.fc_b, b.hpre);
    if (b.hact != b.hpre) std::memcpy(b.hact, b.hpre, MF * sizeof(float));
    kernels::activation(c.activation, b.hact, M, c.ffn_hidden, pool);
    linear(LoraTarget::Fc2, b.hact, L.fc2, L.fc2_b, b.tmp);
    for (size_t i = 0; i < MC; ++i) b.x_out[i] = b.x_mid[i] + b.tmp[i];
}

}  // namespace ember
