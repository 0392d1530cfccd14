// The char-level tokenizer of the lecture: id i is the i-th code point of sorted(set(text)).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class CharTokenizer {
public:
    // code_points: ascending, unique (as Model verifies them).
    explicit CharTokenizer(std::vector<uint32_t> code_points);

    int vocab_size() const { return static_cast<int>(code_points_.size()); }

    // UTF-8 text -> ids. Throws ember::Error naming the first character not in the vocabulary
    // and its position (0-based, in characters), or the byte offset of invalid UTF-8.
    // `what` names the source in the message ("prompt", a file name).
    std::vector<int> encode(std::string_view text, const std::string& what) const;

    // Id -> the character's UTF-8 bytes in out; returns their count (1..4). Allocates nothing.
    // id must be in [0, vocab_size).
    int decode(int id, char out[4]) const;

    std::string decode(const std::vector<int>& ids) const;

    // Id of cp, or -1.
    int find(uint32_t cp) const;

private:
    std::vector<uint32_t> code_points_;
};

}  // namespace ember
