// The backend interface: what generate, eval and bench need from a session, whatever runs it
// (the CPU Session in session.h, the CUDA session in cuda_session.h). backend.h makes one.
// Letters: V vocab_size, S block_size, T window length.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

class Generator {
public:
    virtual ~Generator() = default;

    // Forgets the sequence.
    virtual void reset() = 0;
    // Appends ids [n] under the context policy; afterwards logits() holds the next-token
    // logits [V] (host memory) after the last id. Ids outside [0, V) throw ember::Error.
    virtual void append(const int* ids, int n) = 0;
    virtual const float* logits() const = 0;
    // Eval: ids [T] (1 <= T <= S) from an empty cache at positions 0..T-1; returns logits
    // [T, V] (host memory). Needs SessionOptions::all_logits. Resets the sequence.
    virtual const float* forward_window(const int* ids, int T) = 0;
    virtual int64_t tokens_seen() const = 0;
    // Host scratch for a Sampler: [V] floats and [V] ints.
    virtual float* sampler_probs() const = 0;
    virtual int* sampler_ids() const = 0;
    // One line on how this backend runs (e.g. whether CUDA captured its decode graph); empty
    // when there is nothing to say.
    virtual std::string describe() const { return {}; }
};

}  // namespace ember
