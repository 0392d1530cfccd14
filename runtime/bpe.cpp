#include "runtime/bpe.h"

#include <cstring>
#include <queue>
#include <unordered_set>

#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/unicode_class.h"
#include "runtime/utf8.h"

namespace ember {

namespace {

uint64_t pair_key(uint32_t a, uint32_t b) { return static_cast<uint64_t>(a) << 32 | b; }

}  // namespace

void verify_bpe(const BpeData& d, const std::string& what) {
    if (d.offsets.size() < 257 || d.offsets.size() - 1 > static_cast<size_t>(kMaxBpeTokens)) {
        fail(what, ": BPE tokenizer has ", d.offsets.empty() ? 0 : d.offsets.size() - 1, " tokens; needs 256 to ", kMaxBpeTokens);
    }
    const int n = d.size();
    if (d.offsets[0] != 0 || d.offsets[n] != d.bytes.size()) {
        fail(what, ": BPE token offsets run from ", d.offsets[0], " to ", d.offsets[n], " but the token bytes are ", d.bytes.size());
    }
    std::unordered_map<std::string_view, int> seen;
    seen.reserve(static_cast<size_t>(n));
    std::vector<char> available(static_cast<size_t>(n), 0);
    int n_single = 0;
    for (int i = 0; i < n; ++i) {
        if (d.offsets[i + 1] <= d.offsets[i]) fail(what, ": BPE token ", i, " is empty (offsets must ascend)");
        if (d.offsets[i + 1] - d.offsets[i] > kMaxTokenBytes) fail(what, ": BPE token ", i, " is longer than ", kMaxTokenBytes, " bytes");
        const std::string_view t = d.token(i);
        auto [it, fresh] = seen.emplace(t, i);
        if (!fresh) fail(what, ": BPE tokens ", it->second, " and ", i, " have the same bytes");
        if (t.size() == 1) {
            available[i] = 1;
            ++n_single;
        }
    }
    if (n_single != 256) fail(what, ": BPE tokenizer has ", n_single, " single-byte tokens; byte-level BPE needs all 256");
    if (d.merges.size() > static_cast<size_t>(n)) fail(what, ": BPE tokenizer has more merges (", d.merges.size(), ") than tokens");
    std::unordered_set<uint64_t> pairs;
    pairs.reserve(d.merges.size());
    for (size_t r = 0; r < d.merges.size(); ++r) {
        const BpeMerge& m = d.merges[r];
        if (m.left >= static_cast<uint32_t>(n) || m.right >= static_cast<uint32_t>(n) || m.result >= static_cast<uint32_t>(n)) {
            fail(what, ": BPE merge ", r, " refers to a token past ", n - 1);
        }
        if (!available[m.left] || !available[m.right]) {
            fail(what, ": BPE merge ", r, " uses token ", available[m.left] ? m.right : m.left,
                 ", which is neither a byte nor the result of an earlier merge");
        }
        const std::string_view a = d.token(static_cast<int>(m.left)), b = d.token(static_cast<int>(m.right));
        const std::string_view c = d.token(static_cast<int>(m.result));
        if (c.size() != a.size() + b.size() || c.compare(0, a.size(), a) != 0 || c.compare(a.size(), b.size(), b) != 0) {
            fail(what, ": BPE merge ", r, ": token ", m.result, " is not token ", m.left, " followed by token ", m.right);
        }
        if (available[m.result]) fail(what, ": BPE merge ", r, " produces token ", m.result, ", which a byte or an earlier merge already is");
        if (!pairs.insert(pair_key(m.left, m.right)).second) fail(what, ": BPE merge ", r, " repeats the pair (", m.left, ", ", m.right, ")");
        available[m.result] = 1;
    }
}

std::vector<std::pair<size_t, size_t>> gpt2_pieces(std::string_view text, const std::string& what) {
    // Code points with their byte offsets (one past the end: text.size()).
    std::vector<uint32_t> cps;
    std::vector<size_t> at;
    cps.reserve(text.size());
    at.reserve(text.size() + 1);
    for (size_t pos = 0; pos < text.size();) {
        uint32_t cp = 0;
        at.push_back(pos);
        if (!utf8_next(text, pos, cp)) fail(what, ": invalid UTF-8 at byte ", pos);
        cps.push_back(cp);
    }
    at.push_back(text.size());
    const size_t n = cps.size();
    auto cls = [&](size_t i) { return unicode_class(cps[i]); };
    auto run = [&](size_t i, UnicodeClass c) {  // end of the run of class c from i
        while (i < n && cls(i) == c) ++i;
        return i;
    };
    auto other = [&](size_t i) {  // [^\s\p{L}\p{N}]
        return cls(i) == UnicodeClass::Other;
    };
    std::vector<std::pair<size_t, size_t>> pieces;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        // 's|'t|'re|'ve|'m|'ll|'d (lowercase only, as in GPT-2's pattern)
        if (cps[i] == '\'' && i + 1 < n) {
            const uint32_t a = cps[i + 1], b = i + 2 < n ? cps[i + 2] : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd') j = i + 2;
            else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) j = i + 3;
        }
        if (j == i) {
            const size_t k = cps[i] == ' ' && i + 1 < n ? i + 1 : i;  // the optional leading space
            const UnicodeClass c = cls(k);
            if (c == UnicodeClass::Letter || c == UnicodeClass::Number) {  //  ?\p{L}+ |  ?\p{N}+
                j = run(k, c);
            } else if (other(k)) {  //  ?[^\s\p{L}\p{N}]+
                j = k;
                while (j < n && other(j)) ++j;
            } else {  // \s+(?!\S) | \s+ : a run of spaces, less its last one when a non-space follows
                const size_t end = run(i, UnicodeClass::Space);
                j = end == n || end - i == 1 ? end : end - 1;
            }
        }
        pieces.emplace_back(at[i], at[j]);
        i = j;
    }
    return pieces;
}

BpeTokenizer::BpeTokenizer(BpeData d) : data_(std::move(d)) {
    const int n = data_.size();
    id_of_.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        const std::string_view t = data_.token(i);
        id_of_.emplace(t, i);
        if (t.size() == 1) byte_id_[static_cast<uint8_t>(t[0])] = i;
        max_token_bytes_ = std::max(max_token_bytes_, static_cast<int>(t.size()));
    }
    rank_.reserve(data_.merges.size());
    for (size_t r = 0; r < data_.merges.size(); ++r) rank_.emplace(pair_key(data_.merges[r].left, data_.merges[r].right), static_cast<uint32_t>(r));
}

int BpeTokenizer::find(std::string_view s) const {
    auto it = id_of_.find(s);
    return it == id_of_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_piece(const uint8_t* s, size_t n, std::vector<int>& out) const {
    if (n == 1) {
        out.push_back(byte_id_[s[0]]);
        return;
    }
    // A doubly linked list of tokens over the piece's bytes and a min-heap of (rank, position)
    // of adjacent pairs; entries that no longer match the list are skipped when popped.
    std::vector<int> id(n), prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
        id[i] = byte_id_[s[i]];
        prev[i] = static_cast<int>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int>(i) + 1 : -1;
    }
    using Entry = std::pair<uint32_t, int>;  // (rank, position of the left token)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto push = [&](int p) {
        if (p < 0 || next[p] < 0) return;
        auto it = rank_.find(pair_key(static_cast<uint32_t>(id[p]), static_cast<uint32_t>(id[next[p]])));
        if (it != rank_.end()) heap.emplace(it->second, p);
    };
    for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int>(i));
    while (!heap.empty()) {
        const auto [r, p] = heap.top();
        heap.pop();
        const BpeMerge& m = data_.merges[r];
        const int q = next[p];
        if (id[p] < 0 || q < 0 || static_cast<uint32_t>(id[p]) != m.left || static_cast<uint32_t>(id[q]) != m.right) continue;  // stale
        id[p] = static_cast<int>(m.result);
        id[q] = -1;  // gone
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        push(prev[p]);
        push(p);
    }
    for (int p = 0; p >= 0; p = next[p]) out.push_back(id[p]);
}

std::vector<int> BpeTokenizer::encode(std::string_view text, const std::string& what) const {
    // A long text is checked against the machine first: `ember eval` peaked at 36 bytes per byte
    // of text (8 MB, GPT-2's pre-tokenizer), so a read limit of 1 GiB alone admits an OOM kill.
    if (text.size() > (size_t{1} << 20)) {
        check_memory(static_cast<uint64_t>(text.size()) * 40, 0, what, " to encode " + std::to_string(text.size()) + " bytes of text");
    }
    std::vector<int> ids;
    ids.reserve(text.size() / 2 + 1);
    for (const auto& [b, e] : gpt2_pieces(text, what)) {
        const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + b;
        encode_piece(s, e - b, ids);
    }
    return ids;
}

}  // namespace ember
