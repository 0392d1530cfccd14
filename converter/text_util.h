// Small text helpers for the checkpoint readers: safe quoting of untrusted names in error
// messages, and strict UTF-8 decoding.
#pragma once

#include <cstdint>
#include <string>

namespace ember::convert {

// `s` made safe for a one-line message: control and non-ASCII bytes become \xNN, and
// anything past max_len is cut and marked "...".
std::string printable(const std::string& s, size_t max_len = 80);

// When `s` is exactly one Unicode scalar value in well-formed UTF-8 (no overlong forms,
// no surrogates, at most U+10FFFF), stores it in `code_point` and returns true.
bool decode_single_code_point(const std::string& s, uint32_t& code_point);

}  // namespace ember::convert
