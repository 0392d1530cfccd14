// Mean cross-entropy of a token sequence, torch.nn.functional.cross_entropy averaged over
// every scored position: ids are cut into back-to-back windows of block_size tokens
// (x = ids[s : s+S], y = ids[s+1 : s+S+1], the last window shorter), each run from an
// empty cache at positions 0.., every position scored.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/session.h"

namespace ember {

struct EvalResult {
    double loss = 0.0;    // nats per token
    int64_t tokens = 0;   // scored positions
};

// session: planned with all_logits. ids: at least 2, each in [0, n_real). Logit rows are
// [vocab_size]; the softmax runs over the first n_real of them, the ids the tokenizer knows
// (0 = all: no padding rows). Throws ember::Error.
EvalResult evaluate(Session& session, const int* ids, int64_t n, int block_size, int vocab_size, int n_real = 0);

// The lecture's split: val = ids[int(0.9 * n):] (train the first 90%).
int64_t val_split_start(int64_t n);

}  // namespace ember
