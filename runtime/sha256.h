// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto.
#pragma once

#include <cstddef>
#include <string>

namespace ember {

// Lowercase hex digest of a file's bytes. Throws ember::Error when it cannot be read.
std::string sha256_file(const std::string& path);

// Lowercase hex digest of a buffer.
std::string sha256_hex(const void* data, size_t n);

// The 32 bytes of a buffer's digest (what the flash protocol's OFFER carries).
std::string sha256_raw(const void* data, size_t n);

// n bytes as 2n lowercase hex digits.
std::string hex_lower(const void* bytes, size_t n);

}  // namespace ember
