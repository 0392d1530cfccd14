// Picking the next token from logits [V].
//   temperature 0: greedy, the first maximal index (torch.argmax, except that a NaN ranks
//     as -inf here, as below, where torch.argmax would return its index).
//   otherwise: softmax(logits / temperature) restricted by
//     top-k: keeps every logit >= the k-th largest (ties kept; k clamped to V; 0 = off),
//     top-p: keeps the smallest set of most probable tokens whose probability sums to >= p
//            (Holtzman et al. 2019, "nucleus sampling"; 1 = off),
//   NaN logits (weights that overflow) rank as -inf and are never drawn; a +inf logit wins;
//   when every logit is NaN there is nothing to draw: ember::Error;
//   then one draw from a seeded std::mt19937_64 (the same seed gives the same text on every
//   platform: the draw uses the generator's raw bits, no std:: distribution).
// Before all of these, the repetition penalty (apply_repeat_penalty below) when one is given.
// Options are checked by validate(): temperature >= 0 and finite, top_k >= 0, 0 < top_p <= 1,
// repeat_penalty finite and > 0, repeat_last_n >= -1.
#pragma once

#include <cstdint>
#include <random>

namespace ember {

struct SamplerOptions {
    float temperature = 1.0f;
    int top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 1337;
    // llama.cpp's --repeat-penalty / --repeat-last-n (apply_repeat_penalty): R = 1 is off,
    // N = 0 is off, N = -1 is the context size (block_size); N is clamped to block_size, the
    // tokens the session keeps.
    float repeat_penalty = 1.0f;
    int repeat_last_n = 64;

    void validate() const;  // throws ember::Error naming the option
};

// The repetition penalty of llama.cpp (llama_sampler_penalties; CTRL, Keskar et al. 2019,
// as Hugging Face's RepetitionPenaltyLogitsProcessor applies it): for each distinct id
// among recent [n], logits[id] is divided by `penalty` when > 0, else multiplied by it.
// out [V] = logits, then out[id] = the penalized logits[id] for each id of recent: read from
// the unpenalized logits, so an id that repeats is penalized once, in O(V + n) (no search for
// earlier occurrences). Every id must lie in [0, V); out must not alias logits. Allocates nothing.
void apply_repeat_penalty(const float* logits, int V, const int* recent, int n, float penalty, float* out);

class Sampler {
public:
    // scratch_probs [V] and scratch_ids [V]: caller-owned (the session's arena).
    Sampler(const SamplerOptions& opts, int vocab_size, float* scratch_probs, int* scratch_ids);

    // Returns an id in [0, V). Allocates nothing, except the message of the ember::Error
    // thrown when every logit is NaN.
    int sample(const float* logits);
    // With the repetition penalty over recent [n] (the last tokens, the prompt's included):
    // logits [V] are copied to penalized [V] (caller-owned scratch), penalized there, then
    // sampled from. Without a penalty (repeat_penalty 1 or n 0) it is sample(logits).
    int sample(const float* logits, const int* recent, int n, float* penalized);

private:
    SamplerOptions opts_;
    int V_;
    float* probs_;
    int* ids_;
    std::mt19937_64 rng_;
};

}  // namespace ember
