#include "converter/text_util.h"

namespace ember::convert {

std::string printable(const std::string& s, size_t max_len) {
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

bool decode_single_code_point(const std::string& s, uint32_t& code_point) {
    if (s.empty()) return false;
    const auto b0 = static_cast<unsigned char>(s[0]);
    size_t len;
    uint32_t cp;
    uint32_t min;
    if (b0 < 0x80) {
        len = 1, cp = b0, min = 0;
    } else if ((b0 & 0xe0) == 0xc0) {
        len = 2, cp = b0 & 0x1fu, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
        len = 3, cp = b0 & 0x0fu, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
        len = 4, cp = b0 & 0x07u, min = 0x10000;
    } else {
        return false;  // a continuation byte or 0xf8..0xff
    }
    if (s.size() != len) return false;
    for (size_t i = 1; i < len; ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if ((b & 0xc0) != 0x80) return false;
        cp = (cp << 6) | (b & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    code_point = cp;
    return true;
}

}  // namespace ember::convert
