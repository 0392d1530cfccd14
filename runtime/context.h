// The bookkeeping of the context policies (DESIGN.md "Runtime"), shared by every backend:
// which of the appended tokens run through the network at which positions and KV rows.
// The backend supplies the forward pass; this class decides what it is asked to run.
//   exact: while the sequence fits (S = block_size), token k runs at position k, KV row k;
//          past S, every append recomputes the newest S tokens at positions 0..S-1.
//   shift: when the cache is full, the newest S/2 tokens are recomputed at positions
//          0..S/2-1, then appending goes on.
//   ring:  past S, each token overwrites KV row (k mod S) at position S-1 and attends to all
//          S rows (stale K/V kept); O(1) per token, approximate.
// Allocates nothing: the history and window buffers are the caller's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace ember {

enum class ContextPolicy { Exact, Shift, Ring };
ContextPolicy parse_context_policy(const std::string& s);  // throws ember::Error
const char* context_policy_name(ContextPolicy p);          // "exact" | "shift" | "ring", as --context spells them

// Throws ember::Error naming the first id outside [0, vocab_size) and its index.
void check_token_ids(const int* ids, int n, int vocab_size);
// An eval window ids [T]: 1 <= T <= block_size, ids checked, and a session planned with
// all_logits (SessionOptions). Throws ember::Error.
void check_window(const int* ids, int T, int block_size, int vocab_size, bool all_logits);

class ContextWindow {
public:
    // history [S]: token k is kept at k mod S. window [S]: scratch for a recomputed window.
    ContextWindow(ContextPolicy policy, int block_size, int* history, int* window)
        : policy_(policy), S_(block_size), history_(history), window_(window) {}

    void reset() { n_seen_ = 0, n_cached_ = 0; }
    int64_t tokens_seen() const { return n_seen_; }

    // Appends ids [n] (already checked) and calls forward(ids, T, pos0, row0, n_keys0) for each
    // span to run: ids [T] at positions pos0.., writing K/V rows row0..row0+T-1, query t
    // attending to rows [0, n_keys0 + t). The last call's last row is the newest token.
    template <typename Forward>
    void append(const int* ids, int n, Forward&& forward) {
        int i = 0;
        while (i < n) {
            const int left = n - i;
            switch (policy_) {
            case ContextPolicy::Exact:
                if (n_seen_ + left <= S_) {
                    const int at = static_cast<int>(n_seen_);
                    push_history(ids + i, left);
                    forward(ids + i, left, at, at, at + 1);
                    n_cached_ = at + left;
                } else {  // the window slides: recompute the last S tokens at positions 0..S-1
                    push_history(ids + i, left);
                    recompute(S_, forward);
                }
                i = n;
                break;
            case ContextPolicy::Shift: {
                const int room = S_ - (n_cached_ == S_ ? S_ / 2 : n_cached_);
                const int chunk = std::min(left, room);
                if (chunk < left) {
                    // More follows this chunk, and the window is full after it, so the next chunk
                    // starts with a recompute from the history that drops every K/V this one would
                    // write: only its ids are kept. A prompt of any length then costs the last
                    // window's work, not a forward of every token (300,000 characters took 8.6 s).
                    push_history(ids + i, chunk);
                    n_cached_ = S_;
                    i += chunk;
                    break;
                }
                if (n_cached_ == S_) recompute(S_ / 2, forward);
                push_history(ids + i, chunk);
                forward(ids + i, chunk, n_cached_, n_cached_, n_cached_ + 1);
                n_cached_ += chunk;
                i += chunk;
                break;
            }
            case ContextPolicy::Ring:
                if (n_seen_ < S_) {
                    const int at = static_cast<int>(n_seen_);
                    const int chunk = std::min(left, S_ - at);
                    push_history(ids + i, chunk);
                    forward(ids + i, chunk, at, at, at + 1);
                    i += chunk;
                } else {  // overwrite the oldest slot; the newest token sits at position S-1
                    const int slot = static_cast<int>(n_seen_ % S_);
                    push_history(ids + i, 1);
                    forward(ids + i, 1, S_ - 1, slot, S_);
                    i += 1;
                }
                break;
            }
        }
    }

    // The newest min(n, tokens seen, S) ids appended, oldest first, copied to out [S] (for the
    // repetition penalty; n = -1 or n > S: S). Returns the count. Allocates nothing.
    int recent(int n, int* out) const {
        int64_t k = n < 0 || n > S_ ? S_ : n;
        k = std::min<int64_t>(k, n_seen_);
        for (int64_t i = 0; i < k; ++i) out[i] = history_[(n_seen_ - k + i) % S_];
        return static_cast<int>(k);
    }

private:
    void push_history(const int* ids, int n) {
        for (int i = 0; i < n; ++i) history_[(n_seen_ + i) % S_] = ids[i];
        n_seen_ += n;
    }
    // The newest n_tokens of the history, run at positions 0.. from an empty cache.
    template <typename Forward>
    void recompute(int n_tokens, Forward& forward) {
        const int64_t first = n_seen_ - n_tokens;
        for (int i = 0; i < n_tokens; ++i) window_[i] = history_[(first + i) % S_];
        if (n_tokens > 0) forward(window_, n_tokens, 0, 0, 1);
        n_cached_ = n_tokens;
    }

    ContextPolicy policy_;
    int S_;
    int* history_;  // [S]
    int* window_;   // [S]
    int64_t n_seen_ = 0;  // tokens appended since reset
    int n_cached_ = 0;    // valid KV rows (exact, shift)
};

}  // namespace ember
