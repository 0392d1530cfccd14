// Mean cross-entropy of a token sequence, torch.nn.functional.cross_entropy averaged over
// every scored position: ids are cut into back-to-back windows of block_size tokens
// (x = ids[s : s+S], y = ids[s+1 : s+S+1], the last window shorter), each run from an
// empty cache at positions 0.., every position scored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace ember {

struct EvalResult {
    double loss = 0.0;    // nats per token
    int64_t tokens = 0;   // scored positions
    // The first token (index into ids) whose loss is not finite, -1 if none: logits that
    // overflow f32 make loss nan or inf, as PyTorch's cross_entropy does. The programs refuse
    // to print such a loss (eval_loss_check); a fine-tune reads it as divergence.
    int64_t first_non_finite = -1;
    std::string non_finite_logit;  // what that row held first: "logit 0 is +inf"
};

// A non-finite loss as the programs print it: "nan" (not printf's "-nan": a NaN's sign means
// nothing), "+inf" or "-inf". Only for values where std::isfinite is false.
const char* non_finite_text(double v);

// Throws ember::Error where r.loss is not finite, naming the token and the logit, for the
// commands that print a loss (`ember eval`, the console's eval).
void eval_loss_check(const EvalResult& r);

// session: planned with all_logits. ids: at least 2, each in [0, n_real). Logit rows are
// [vocab_size]; the softmax runs over the first n_real of them, the ids the tokenizer knows
// (0 = all: no padding rows). Throws ember::Error.
EvalResult evaluate(Session& session, const int* ids, int64_t n, int block_size, int vocab_size, int n_real = 0);

// The lecture's split: val = ids[int(0.9 * n):] (train the first 90%).
int64_t val_split_start(int64_t n);

}  // namespace ember
