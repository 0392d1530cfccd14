#include "runtime/text_stream.h"

#include <cstdint>
#include <cstring>

#include "runtime/error.h"

namespace ember {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The sequence at s[0..n): length of a complete well-formed character (> 0), or of the maximal
// ill-formed subpart to replace (< 0, as its negation), or 0 when the n bytes are a valid but
// incomplete prefix of a character. Table 3-7 of the Unicode Standard.
int next_sequence(const uint8_t* s, size_t n) {
    const uint8_t b0 = s[0];
    if (b0 < 0x80) return 1;
    int len;
    uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return -1;  // a continuation byte, C0, C1, F5..FF: never valid
    }
    for (int i = 1; i < len; ++i) {
        if (static_cast<size_t>(i) >= n) return 0;
        const uint8_t b = s[i];
        const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) return -i;
    }
    return len;
}

// Decodes s[0..n) into out (room for 3 bytes per input byte); stops before a trailing
// incomplete sequence unless final. Returns the bytes written; *consumed gets the input used.
size_t decode_into(const uint8_t* s, size_t n, bool final, char* out, size_t* consumed) {
    size_t i = 0, o = 0;
    while (i < n) {
        const int r = next_sequence(s + i, n - i);
        if (r > 0) {
            std::memcpy(out + o, s + i, static_cast<size_t>(r));
            o += static_cast<size_t>(r);
            i += static_cast<size_t>(r);
        } else if (r < 0) {
            std::memcpy(out + o, kReplacement, 3);
            o += 3;
            i += static_cast<size_t>(-r);
        } else {
            if (!final) break;
            std::memcpy(out + o, kReplacement, 3);  // an incomplete tail at the end: one U+FFFD
            o += 3;
            i = n;
        }
    }
    *consumed = i;
    return o;
}

}  // namespace

std::string utf8_decode_replace(std::string_view bytes) {
    std::string out(bytes.size() * 3, '\0');
    size_t consumed = 0;
    out.resize(decode_into(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), true, out.data(), &consumed));
    return out;
}

Utf8Stream::Utf8Stream(size_t max_feed) : in_(max_feed + 4), out_(3 * (max_feed + 4)), max_feed_(max_feed) {}

std::string_view Utf8Stream::feed(const char* bytes, size_t n) {
    if (n > max_feed_) fail("text stream: a feed of ", n, " bytes is more than the ", max_feed_, " it was sized for");
    if (n) std::memcpy(in_.data() + n_held_, bytes, n);
    const size_t total = n_held_ + n;
    size_t consumed = 0;
    const size_t written = decode_into(reinterpret_cast<const uint8_t*>(in_.data()), total, false, out_.data(), &consumed);
    n_held_ = total - consumed;  // at most 3: a valid prefix of a 4-byte character
    std::memmove(in_.data(), in_.data() + consumed, n_held_);
    return {out_.data(), written};
}

std::string_view Utf8Stream::finish() {
    size_t consumed = 0;
    const size_t written = decode_into(reinterpret_cast<const uint8_t*>(in_.data()), n_held_, true, out_.data(), &consumed);
    n_held_ = 0;
    return {out_.data(), written};
}

}  // namespace ember
