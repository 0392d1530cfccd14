// A tiny random model in GPT-2's shape with GPT-2's padded vocabulary, built in memory for the
// tests of the BPE chain (the tokenizer files are real; the weights are not).
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "runtime/model.h"

namespace ember::test {

// One block, n_head 2, tanh GELU, own lm_head with a zero bias [V] (the last tensor, for a
// test to shape the logits). Weights ~ N(0, 0.5^2) from `seed`, LayerNorm weights 1.
inline convert::CanonicalModel tiny_gpt2_model(int V, int C, int S, unsigned seed) {
    convert::CanonicalModel cm;
    ModelConfig& c = cm.config;
    c.arch = Arch::HfGpt2;
    c.n_layer = 1;
    c.n_head = 2;
    c.n_embd = C;
    c.block_size = S;
    c.vocab_size = V;
    c.ffn_hidden = 4 * C;
    c.activation = kernels::ActivationKind::GeluTanh;
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(C / 2));
    c.tied_lm_head = false;
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    auto t = [&](const std::string& name, std::vector<int64_t> shape, float base = 0.0f, bool random = true) {
        int64_t n = 1;
        for (auto d : shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) x = base + (random ? nd(rng) : 0.0f);
        cm.tensors.push_back({name, shape, std::move(v), name, convert::SourceDType::F32, nullptr});
    };
    t("wte", {V, C});
    t("wpe", {S, C});
    t("h.0.ln_1.weight", {C}, 1.0f);
    t("h.0.qkv.weight", {3 * C, C});
    t("h.0.proj.weight", {C, C});
    t("h.0.ln_2.weight", {C}, 1.0f);
    t("h.0.fc.weight", {4 * C, C});
    t("h.0.fc2.weight", {C, 4 * C});
    t("ln_f.weight", {C}, 1.0f);
    t("lm_head.weight", {V, C});
    t("lm_head.bias", {V}, 0.0f, false);
    return cm;
}

}  // namespace ember::test
