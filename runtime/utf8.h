// Reading text files, and UTF-8 (RFC 3629) decoding and encoding of Unicode scalar values. Decoding is strict:
// overlong forms, surrogates, values past U+10FFFF and truncated sequences are errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// Decodes one code point at s[pos]; advances pos. Returns false (pos unchanged) when the
// bytes there are not valid UTF-8.
bool utf8_next(std::string_view s, size_t& pos, uint32_t& cp);

// Decodes all of s. Throws ember::Error naming `what` and the byte offset of the first
// invalid sequence.
std::vector<uint32_t> utf8_decode(std::string_view s, const std::string& what);

// Encodes cp (a scalar value) into out[0..n), n in 1..4; returns n.
int utf8_encode(uint32_t cp, char out[4]);

// "'a' (U+0061)", or "U+000A" alone for control characters (C0, DEL, C1) and the characters
// that change a terminal's layout of the rest of the line (bidirectional controls U+202A to
// U+202E and U+2066 to U+2069, U+200B to U+200F, U+2060 to U+2065, U+061C, U+FEFF).
std::string describe_code_point(uint32_t cp);

// When s is exactly one Unicode scalar value in well-formed UTF-8, stores it in cp.
bool decode_single_code_point(std::string_view s, uint32_t& cp);

// Untrusted text (a tensor name, a key, a path) made safe for a one-line message: bytes
// outside printable ASCII and the backslash become \xNN; past max_len it is cut, "...".
std::string printable(std::string_view s, size_t max_len = 80);

// Untrusted text for a terminal, whole: valid UTF-8 characters kept, control characters (C0,
// DEL, C1: a terminal's escape sequences), the layout controls above, NUL, invalid bytes and
// the backslash as \xNN.
std::string displayable(std::string_view s);

// The bytes of a regular file of at most max_bytes (directories, devices, FIFOs and larger
// files are refused), read to its end. Throws ember::Error naming the path and the reason
// (errno's text): one that cannot be opened, or a read error (EIO), which never ends the text
// early. `kind` names the file in the size refusal ("FILE: N bytes is more than the M bytes
// KIND may have"): "a tokenizer file", "an adapter", ...
std::string read_text_file(const std::string& path, size_t max_bytes = size_t(1) << 30, const char* kind = "a text");

}  // namespace ember
