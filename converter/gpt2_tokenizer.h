// Reading GPT-2's tokenizer files into a byte-level BPE (runtime/bpe.h):
//   encoder.json (Hugging Face: vocab.json): {"token": id}, each token written with GPT-2's
//     bytes_to_unicode alphabet (byte b as one printable code point; OpenAI's encoder.py),
//     ids 0..n-1 each once;
//   vocab.bpe (Hugging Face: merges.txt): "#version: ..." then one merge "A B" per line in rank
//     order; A, B and AB must be tokens.
//   tokenizer.json (Hugging Face tokenizers, one file): model.type "BPE" with model.vocab and
//     model.merges ("A B" strings, or ["A", "B"] pairs since tokenizers 0.20), a ByteLevel
//     pre_tokenizer (add_prefix_space false) and decoder, no normalizer; added_tokens either in
//     model.vocab under the same id or taking the next ids (their text as raw bytes). Another
//     model (WordPiece, Unigram, WordLevel) or pre-tokenizer is refused, naming it.
// Special tokens such as <|endoftext|> are ordinary entries of encoder.json no merge makes, so
// encoding never produces them (tiktoken's encode_ordinary) and decoding gives their text.
#pragma once

#include <string>
#include <vector>

#include "runtime/bpe.h"

namespace ember::convert {

// files: the two files in either order (told apart by content: a JSON object or a merges
// list), one tokenizer.json, or one folder holding encoder.json + vocab.bpe, vocab.json +
// merges.txt or tokenizer.json (in that order of preference).
// The result has passed verify_bpe. Throws ember::Error naming the file and line or token.
BpeData read_gpt2_tokenizer(const std::vector<std::string>& files);

// GPT-2's bytes_to_unicode: the code point that stands for byte b in encoder.json / vocab.bpe.
uint32_t gpt2_byte_to_code_point(uint8_t b);

}  // namespace ember::convert
