// GPT-2's byte-level BPE tokenizer (Radford et al. 2019; OpenAI's gpt-2 `encoder.py`, tiktoken's
// "gpt2" encoding).
//
// Encoding: the text (valid UTF-8) is cut into pieces by GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (implemented by hand over runtime/unicode_class.h), each piece starts as one token per
// byte, and the adjacent pair of lowest merge rank is merged until no pair has a rank
// (equal ranks: the leftmost first, as encoder.py's left-to-right pass does).
// Decoding: the concatenated bytes of the tokens (not necessarily valid UTF-8 until the
// sequence is complete; see runtime/text_stream.h).
//
// The vocabulary is data (BpeData), verified by verify_bpe before any use: it comes from an
// untrusted file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember {

constexpr size_t kMaxTokenBytes = 1024;
constexpr int kMaxBpeTokens = 1 << 24;

// Merge of rank r (its index): the adjacent pair (left, right) becomes `result`, whose bytes are
// left's followed by right's.
struct BpeMerge {
    uint32_t left = 0, right = 0, result = 0;
};

struct BpeData {
    std::vector<uint32_t> offsets;  // [n + 1]: token i is bytes[offsets[i], offsets[i+1])
    std::string bytes;
    std::vector<BpeMerge> merges;   // in rank order

    int size() const { return offsets.empty() ? 0 : static_cast<int>(offsets.size() - 1); }
    std::string_view token(int id) const { return std::string_view(bytes).substr(offsets[id], offsets[id + 1] - offsets[id]); }
};

// Checks everything encoding relies on; throws ember::Error naming `what` and the entry:
// 256 <= n <= 2^24 tokens, offsets ascending from 0 to bytes.size(), every token 1..1024 bytes,
// no two tokens alike, every single byte a token, each merge's ids in range, its result's
// bytes = left's + right's, no pair or result twice, and left and right each a single byte
// or the result of an earlier merge.
void verify_bpe(const BpeData& d, const std::string& what);

// Pieces of GPT-2's pre-tokenization pattern over UTF-8 text: byte ranges {begin, end} in order,
// covering the text. Throws ember::Error naming `what` and the byte offset of invalid UTF-8.
std::vector<std::pair<size_t, size_t>> gpt2_pieces(std::string_view text, const std::string& what);

class BpeTokenizer {
public:
    // d must have passed verify_bpe (Model::open does it).
    explicit BpeTokenizer(BpeData d);

    int size() const { return data_.size(); }
    std::string_view token_bytes(int id) const { return data_.token(id); }  // id in [0, size)
    int max_token_bytes() const { return max_token_bytes_; }
    int n_merges() const { return static_cast<int>(data_.merges.size()); }

    // UTF-8 text -> ids. Throws ember::Error (`what` and the byte offset) on invalid UTF-8.
    std::vector<int> encode(std::string_view text, const std::string& what) const;

    // Id of the token whose bytes are exactly s, or -1.
    int find(std::string_view s) const;

private:
    void encode_piece(const uint8_t* s, size_t n, std::vector<int>& out) const;

    BpeData data_;
    int byte_id_[256] = {};
    std::unordered_map<uint64_t, uint32_t> rank_;  // (left << 32 | right) -> merge rank
    std::unordered_map<std::string_view, int> id_of_;
    int max_token_bytes_ = 0;
};

}  // namespace ember
