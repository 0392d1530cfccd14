#include "runtime/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/error.h"

namespace ember {

namespace {

struct MdCtx {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~MdCtx() { EVP_MD_CTX_free(ctx); }
};

}  // namespace

std::string hex_lower(const void* bytes, size_t n) {
    static const char digits[] = "0123456789abcdef";
    const auto* d = static_cast<const unsigned char*>(bytes);
    std::string s(2 * n, '0');
    for (size_t i = 0; i < n; ++i) {
        s[2 * i] = digits[d[i] >> 4];
        s[2 * i + 1] = digits[d[i] & 15];
    }
    return s;
}

std::string sha256_raw(const void* data, size_t n) {
    MdCtx m;
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (!m.ctx || EVP_DigestInit_ex(m.ctx, EVP_sha256(), nullptr) != 1 || EVP_DigestUpdate(m.ctx, data, n) != 1 ||
        EVP_DigestFinal_ex(m.ctx, out, &len) != 1) {
        fail("SHA-256 failed in libcrypto");
    }
    return std::string(reinterpret_cast<const char*>(out), len);
}

std::string sha256_hex(const void* data, size_t n) {
    const std::string raw = sha256_raw(data, n);
    return hex_lower(raw.data(), raw.size());
}

std::string sha256_file(const std::string& path) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) fail(path, ": cannot open: ", std::strerror(errno));
    MdCtx m;
    if (!m.ctx || EVP_DigestInit_ex(m.ctx, EVP_sha256(), nullptr) != 1) fail("SHA-256 failed in libcrypto");
    std::vector<unsigned char> buf(1 << 16);
    size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) EVP_DigestUpdate(m.ctx, buf.data(), got);
    if (std::ferror(f.get())) fail(path, ": read error");
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(m.ctx, out, &len);
    return hex_lower(out, len);
}

}  // namespace ember
