#include "runtime/tokenizer.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/utf8.h"

namespace ember {

CharTokenizer::CharTokenizer(std::vector<uint32_t> code_points) : code_points_(std::move(code_points)) {}

int CharTokenizer::find(uint32_t cp) const {
    auto it = std::lower_bound(code_points_.begin(), code_points_.end(), cp);
    return it != code_points_.end() && *it == cp ? static_cast<int>(it - code_points_.begin()) : -1;
}

std::vector<int> CharTokenizer::encode(std::string_view text, const std::string& what) const {
    std::vector<int> ids;
    ids.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        uint32_t cp = 0;
        if (!utf8_next(text, pos, cp)) fail(what, ": invalid UTF-8 at byte ", pos);
        const int id = find(cp);
        if (id < 0) {
            fail(what, ": character ", describe_code_point(cp), " at position ", ids.size(),
                 " is not in the model's vocabulary");
        }
        ids.push_back(id);
    }
    return ids;
}

int CharTokenizer::decode(int id, char out[4]) const { return utf8_encode(code_points_[id], out); }

std::string CharTokenizer::decode(const std::vector<int>& ids) const {
    std::string s;
    char buf[4];
    for (int id : ids) s.append(buf, decode(id, buf));
    return s;
}

}  // namespace ember
