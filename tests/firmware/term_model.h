// A terminal reduced to what the console's line editor draws with (firmware/line_editor.h):
// one row of cells and a cursor. A UTF-8 character fills the cell under the cursor and moves
// it right; BS moves it left (never past column 0); LF closes the row and starts a new one.
// Any other byte, and any byte that is not valid UTF-8, marks the model broken: the editor
// must never send one. Used by the line editor's test and its fuzz target.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/utf8.h"

namespace ember::fwtest {

class TermModel {
public:
    // start: what is on the row before the editor draws (the prompt); the cursor follows it.
    explicit TermModel(std::string_view start = "") { feed(start); }

    void feed(std::string_view s) {
        for (size_t p = 0; p < s.size();) {
            const char c = s[p];
            if (c == '\b') {
                if (col_ > 0) --col_;
                ++p;
            } else if (c == '\n') {
                rows_.push_back(text());
                row_.clear();
                col_ = 0;
                ++p;
            } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                broken_ = true;
                ++p;
            } else {
                const size_t from = p;
                uint32_t cp = 0;
                if (!ember::utf8_next(s, p, cp)) {
                    broken_ = true;
                    p = from + 1;
                    continue;
                }
                if (col_ == row_.size()) row_.emplace_back();
                row_[col_++] = std::string(s.substr(from, p - from));
            }
        }
    }
    // The row's text without trailing spaces (a blank cell and a space look the same).
    std::string text() const {
        std::string t;
        for (const auto& c : row_) t += c;
        while (!t.empty() && t.back() == ' ') t.pop_back();
        return t;
    }
    size_t col() const { return col_; }
    bool broken() const { return broken_; }
    const std::vector<std::string>& rows() const { return rows_; }  // closed rows, oldest first

private:
    std::vector<std::string> row_;
    size_t col_ = 0;
    bool broken_ = false;
    std::vector<std::string> rows_;
};

inline std::string trim_right(std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

}  // namespace ember::fwtest
