// Stop strings (llama.cpp's `--reverse-prompt` and its server's "stop", Hugging Face's
// StopStringCriteria): generation ends when the generated text contains one of them. The
// stop string itself is not passed on, nor anything after it (llama.cpp does not print it
// either). Streamed text that may be the start of a stop string is held back until the text
// after it decides: passed on when it turns out not to be one, dropped when it is.
// Matching is on bytes; the text fed is whole UTF-8 characters (text_stream.h), so a match
// never splits a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class StopStrings {
public:
    // stops: non-empty strings, in the order given (throws ember::Error naming an empty one).
    // max_feed: the most bytes one feed() passes. The buffers are sized here; with feeds of at
    // most max_feed bytes, feed() and finish() allocate nothing.
    StopStrings(std::vector<std::string> stops, size_t max_feed);

    // Appends generated text; returns the part now known not to belong to a stop string
    // (possibly empty), valid until the next call. When the text completes a stop string,
    // matched() turns true and the returned text ends just before it (the earliest match).
    std::string_view feed(std::string_view text);
    // The end of generation without a match: the text held back. Empty after a match.
    std::string_view finish();
    // Forgets the text seen (a new generation).
    void reset();

    bool matched() const { return which_ >= 0; }
    int which() const { return which_; }  // index into the stops of the match, -1: none
    const std::vector<std::string>& stops() const { return stops_; }
    size_t held() const { return pending_.size(); }  // bytes held back

private:
    std::vector<std::string> stops_;
    std::string pending_;  // held back: a suffix that is a proper prefix of some stop string
    std::string out_;      // what feed() returns
    int which_ = -1;
};

}  // namespace ember
