// Tokenizers. CharTokenizer: the lecture's char level, id i is the i-th code point of
// sorted(set(text)). Tokenizer: the interface the CLI uses, over a char or a byte-level BPE
// (GPT-2, runtime/bpe.h) tokenizer, made from a loaded model by make_tokenizer.
#pragma once

#include <cstdint>
#include <memory>
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

class Model;

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    virtual const char* kind() const = 0;  // "char" | "byte-level BPE"
    // Ids the tokenizer knows: [0, size()); the model's vocab_size may be larger (padding).
    virtual int size() const = 0;
    // UTF-8 text -> ids. Throws ember::Error naming `what` and the position (invalid UTF-8;
    // a character a char vocabulary lacks).
    virtual std::vector<int> encode(std::string_view text, const std::string& what) const = 0;
    // The bytes of id (in [0, size())); a BPE token may hold part of a UTF-8 character.
    // Allocates nothing.
    virtual std::string_view token_bytes(int id) const = 0;
    // The first id of a generation without a prompt: 0 for char (as the lecture's generate),
    // <|endoftext|> for GPT-2's BPE (0 when it has none).
    virtual int start_id() const = 0;
    int max_token_bytes() const { return max_token_bytes_; }
    // Ids -> text: the tokens' bytes, ill-formed UTF-8 replaced by U+FFFD as Python's
    // bytes.decode(errors="replace") does (runtime/text_stream.h).
    std::string decode(const std::vector<int>& ids) const;

protected:
    int max_token_bytes_ = 4;
};

// The tokenizer a verified model carries (a copy: the model may be closed afterwards).
std::unique_ptr<Tokenizer> make_tokenizer(const Model& model);

}  // namespace ember
