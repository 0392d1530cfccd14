// Streaming token bytes as text. A token of a byte-level BPE may end inside a multi-byte
// UTF-8 character (an emoji is often two or three tokens); Utf8Stream holds such a tail back
// and emits the character whole once its last byte arrives, so a terminal or a serial line
// only ever receives complete characters.
//
// Invalid bytes become U+FFFD, one per maximal subpart of an ill-formed sequence (Unicode
// 15.0 section 3.9, "U+FFFD Substitution of Maximal Subparts"), which is what Python's
// bytes.decode("utf-8", errors="replace") and the WHATWG TextDecoder produce. Hence the
// concatenation of every feed() and finish() equals utf8_decode_replace() of all the bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// bytes -> text with U+FFFD for ill-formed sequences (Python's errors="replace").
std::string utf8_decode_replace(std::string_view bytes);

class Utf8Stream {
public:
    // max_feed: the most bytes one feed() passes (a tokenizer's longest token). Allocates
    // the two buffers once; feed() and finish() allocate nothing.
    explicit Utf8Stream(size_t max_feed);

    // Appends bytes; returns the text now complete (possibly empty), valid until the next
    // call. Throws ember::Error when n > max_feed.
    std::string_view feed(const char* bytes, size_t n);

    // End of the stream: the held-back tail of an incomplete character, as U+FFFD (empty
    // when none). The stream is empty afterwards and can be fed again.
    std::string_view finish();

    size_t held() const { return n_held_; }  // bytes held back (0..3)

private:
    std::vector<char> in_;   // held tail + the new bytes
    std::vector<char> out_;  // decoded text
    size_t max_feed_;
    size_t n_held_ = 0;
};

}  // namespace ember
