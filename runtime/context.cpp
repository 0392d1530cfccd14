#include "runtime/context.h"

#include "runtime/error.h"

namespace ember {

ContextPolicy parse_context_policy(const std::string& s) {
    if (s == "exact") return ContextPolicy::Exact;
    if (s == "shift") return ContextPolicy::Shift;
    if (s == "ring") return ContextPolicy::Ring;
    fail("context policy '", s, "' is unknown (exact, shift or ring)");
}

const char* context_policy_name(ContextPolicy p) {
    return p == ContextPolicy::Exact ? "exact" : p == ContextPolicy::Shift ? "shift" : "ring";
}

void check_token_ids(const int* ids, int n, int vocab_size) {
    for (int i = 0; i < n; ++i) {
        if (ids[i] < 0 || ids[i] >= vocab_size) fail("token id ", ids[i], " at position ", i, " is outside the vocabulary [0, ", vocab_size, ")");
    }
}

void check_window(const int* ids, int T, int block_size, int vocab_size, bool all_logits) {
    if (!all_logits) fail("forward_window needs a session planned with all_logits");
    if (T < 1 || T > block_size) fail("window of ", T, " tokens is outside [1, block_size = ", block_size, "]");
    check_token_ids(ids, T, vocab_size);
}

}  // namespace ember
