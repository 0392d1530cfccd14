// Picking the next token from logits [V].
//   temperature 0: greedy, the first maximal index (torch.argmax).
//   otherwise: softmax(logits / temperature) restricted by
//     top-k: keeps every logit >= the k-th largest (ties kept; k clamped to V; 0 = off),
//     top-p: keeps the smallest set of most probable tokens whose probability sums to >= p
//            (Holtzman et al. 2019, "nucleus sampling"; 1 = off),
//   NaN logits (weights that overflow) rank as -inf and are never drawn; a +inf logit wins;
//   then one draw from a seeded std::mt19937_64 (the same seed gives the same text on every
//   platform: the draw uses the generator's raw bits, no std:: distribution).
// Options are checked by validate(): temperature >= 0 and finite, top_k >= 0, 0 < top_p <= 1.
#pragma once

#include <cstdint>
#include <random>

namespace ember {

struct SamplerOptions {
    float temperature = 1.0f;
    int top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 1337;

    void validate() const;  // throws ember::Error naming the option
};

class Sampler {
public:
    // scratch_probs [V] and scratch_ids [V]: caller-owned (the session's arena).
    Sampler(const SamplerOptions& opts, int vocab_size, float* scratch_probs, int* scratch_ids);

    // Returns an id in [0, V). Allocates nothing.
    int sample(const float* logits);

private:
    SamplerOptions opts_;
    int V_;
    float* probs_;
    int* ids_;
    std::mt19937_64 rng_;
};

}  // namespace ember
