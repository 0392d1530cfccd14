#include "runtime/utf8.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/error.h"

namespace ember {

bool utf8_next(std::string_view s, size_t& pos, uint32_t& cp) {
    if (pos >= s.size()) return false;
    const auto b = [&](size_t i) { return static_cast<uint8_t>(s[pos + i]); };
    const uint8_t c0 = b(0);
    int len;
    uint32_t v;
    if (c0 < 0x80) {
        cp = c0;
        pos += 1;
        return true;
    } else if (c0 >= 0xC2 && c0 <= 0xDF) {
        len = 2;
        v = c0 & 0x1F;
    } else if (c0 >= 0xE0 && c0 <= 0xEF) {
        len = 3;
        v = c0 & 0x0F;
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
        len = 4;
        v = c0 & 0x07;
    } else {
        return false;
    }
    if (s.size() - pos < static_cast<size_t>(len)) return false;
    for (int i = 1; i < len; ++i) {
        if ((b(i) & 0xC0) != 0x80) return false;
        v = (v << 6) | (b(i) & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) {
        return false;
    }
    cp = v;
    pos += len;
    return true;
}

std::vector<uint32_t> utf8_decode(std::string_view s, const std::string& what) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t pos = 0;
    while (pos < s.size()) {
        uint32_t cp = 0;
        if (!utf8_next(s, pos, cp)) fail(what, ": invalid UTF-8 at byte ", pos);
        out.push_back(cp);
    }
    return out;
}

int utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = static_cast<char>(cp);
        return 1;
    }
    if (cp < 0x800) {
        out[0] = static_cast<char>(0xC0 | (cp >> 6));
        out[1] = static_cast<char>(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = static_cast<char>(0xE0 | (cp >> 12));
        out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out[2] = static_cast<char>(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = static_cast<char>(0xF0 | (cp >> 18));
    out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[3] = static_cast<char>(0x80 | (cp & 0x3F));
    return 4;
}

namespace {

// Characters that change how a terminal lays out the text after them: the bidirectional
// controls (U+202E turns the rest of the line around), marks, isolates, and the invisible
// format characters beside them (zero-width spaces and joiners, the byte-order mark).
bool layout_control(uint32_t cp) {
    return (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF ||
           cp == 0x061C;
}

}  // namespace

std::string describe_code_point(uint32_t cp) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "U+%04X", cp);
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) return hex;  // C1 too: CSI (U+009B) starts an escape sequence
    if (layout_control(cp)) return hex;
    char buf[4];
    const int n = utf8_encode(cp, buf);
    return "'" + std::string(buf, n) + "' (" + hex + ")";
}

std::string displayable(std::string_view s) {
    std::string out;
    size_t pos = 0;
    while (pos < s.size()) {
        const size_t at = pos;
        uint32_t cp = 0;
        const bool ok = utf8_next(s, pos, cp);
        if (!ok) pos = at + 1;
        if (ok && cp >= 0x20 && cp != 0x7f && cp != '\\' && !(cp >= 0x80 && cp < 0xa0) && !layout_control(cp)) {
            out.append(s.substr(at, pos - at));
        } else {
            for (size_t i = at; i < pos; ++i) out += printable(s.substr(i, 1));
        }
    }
    return out;
}

std::string read_text_file(const std::string& path, size_t max_bytes, const char* kind) {
    const std::string f = printable(path, 200);
    // O_NONBLOCK: a FIFO is refused below (fstat) instead of waiting here for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(f, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const bool dir = S_ISDIR(st.st_mode);
        ::close(fd);
        if (dir) fail(f, ": is a directory, not a file");
        fail(f, ": not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        ::close(fd);
        fail(f, ": ", st.st_size, " bytes is more than the ", max_bytes, " bytes ", kind, " may have");
    }
    // Read to the end: a file may hold more than fstat says (/proc files say 0), and a read
    // error (EIO) is an error, never an early end of the text.
    std::string out(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    for (;;) {
        if (got == out.size()) {
            if (out.size() >= max_bytes) {
                char probe = 0;  // one more byte means the file grew past the limit
                const ssize_t r = ::read(fd, &probe, 1);
                if (r == 0) break;
                if (r < 0 && errno == EINTR) continue;
                const int e = errno;
                ::close(fd);
                if (r < 0) fail(f, ": cannot read: ", std::strerror(e));
                fail(f, ": more than the ", max_bytes, " bytes ", kind, " may have");
            }
            out.resize(std::min(max_bytes, std::max<size_t>(out.size() * 2, 4096)));
        }
        const ssize_t r = ::read(fd, &out[got], out.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int e = errno;
            ::close(fd);
            fail(f, ": cannot read: ", std::strerror(e), " (after ", got, " bytes)");
        }
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    ::close(fd);
    out.resize(got);
    return out;
}

bool decode_single_code_point(std::string_view s, uint32_t& cp) {
    size_t pos = 0;
    uint32_t v = 0;
    if (!utf8_next(s, pos, v) || pos != s.size()) return false;
    cp = v;
    return true;
}

std::string printable(std::string_view s, size_t max_len) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == max_len) {
            out += "...";
            break;
        }
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

}  // namespace ember
