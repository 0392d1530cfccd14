#include "firmware/line_editor.h"

#include "runtime/utf8.h"

namespace ember::fw {

namespace {

constexpr size_t kMaxParams = 16;  // CSI parameter bytes kept; a longer sequence is ignored whole
constexpr size_t kMaxString = 256;  // bytes of a control string (OSC, DCS, ...) before it is taken to have ended

enum class Key { None, Left, Right, Up, Down, Home, End, Delete };

// The key a CSI or SS3 sequence names (see the header's table), or Key::None.
Key key_of(char final_byte, const std::string& params, bool ss3) {
    for (char p : params)
        if (!((p >= '0' && p <= '9') || p == ';')) return Key::None;  // private (<=>?) or intermediates
    const std::string first = params.substr(0, params.find(';'));
    if (!ss3 && final_byte == '~') {
        if (first == "1" || first == "7") return Key::Home;
        if (first == "4" || first == "8") return Key::End;
        if (first == "3") return Key::Delete;
        return Key::None;  // Insert, Page Up/Down, function keys
    }
    // ESC[D, ESC[1;5D (a modifier), ESC OD; not ESC[5D (a count, which keys do not send).
    if (!params.empty() && (ss3 || first != "1" || params.find(';') == std::string::npos)) return Key::None;
    switch (final_byte) {
        case 'A': return Key::Up;
        case 'B': return Key::Down;
        case 'C': return Key::Right;
        case 'D': return Key::Left;
        case 'H': return Key::Home;
        case 'F': return Key::End;
        default: return Key::None;
    }
}

size_t utf8_length(unsigned char lead) {  // 0: not a lead byte of valid UTF-8
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

bool is_space(const std::string& cell) { return cell == " "; }

}  // namespace

LineEditor::LineEditor(size_t max_bytes, size_t history) : max_bytes_(max_bytes), max_history_(history) {}

std::string LineEditor::text() const {
    std::string s;
    for (const Cell& c : cells_) s += c.bytes;
    return s;
}

std::string LineEditor::shown() const {
    std::string s;
    for (const Cell& c : cells_) draw(c, s);
    return s;
}

void LineEditor::draw(const Cell& c, std::string& screen) { screen += c.bad ? "\xEF\xBF\xBD" : c.bytes; }

LineEditor::Event LineEditor::feed(char byte, bool echo, std::string& screen) {
    const auto c = static_cast<unsigned char>(byte);
    if (esc_ == Esc::AltChar) {  // the rest of an Alt-key's UTF-8 character: ignored with it
        if (c >= 0x80 && c <= 0xBF && --esc_left_ > 0) return Event::None;
        esc_ = Esc::None;
        if (c >= 0x80 && c <= 0xBF) return Event::None;
    }
    if (esc_ == Esc::String || esc_ == Esc::StringEsc) {
        // A control string (OSC, DCS, SOS, PM, APC: a terminal's answer to a query) ends with ST
        // (ESC \) or BEL; CAN and SUB cancel it. CR, LF and Ctrl-C end it and act, so that a
        // stray ESC ] cannot eat a line; so does its length passing kMaxString.
        const bool st = esc_ == Esc::StringEsc && c == '\\';
        if (st || c == 0x07 || c == 0x18 || c == 0x1a) {
            esc_ = Esc::None;
            return Event::None;
        }
        const bool ends = c == '\r' || c == '\n' || c == 0x03 || ++esc_left_ > kMaxString;
        if (!ends) {
            esc_ = c == 0x1b ? Esc::StringEsc : Esc::String;
            return Event::None;
        }
        esc_ = Esc::None;
    }
    if (esc_ != Esc::None) {
        const bool control = c < 0x20 || c == 0x7f;
        if (esc_ == Esc::Start && !control) {
            // ESC [: CSI. ESC O: SS3. ESC ] P X ^ _: a control string. Else ESC + one character
            // (an Alt-key): ignored, all of its UTF-8 bytes.
            const bool string = c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_';
            esc_ = c == '[' ? Esc::Csi : c == 'O' ? Esc::Ss3 : string ? Esc::String : utf8_length(c) > 1 ? Esc::AltChar : Esc::None;
            esc_left_ = esc_ == Esc::AltChar ? utf8_length(c) - 1 : 0;
            params_.clear();
            return Event::None;
        }
        if (esc_ == Esc::Csi && c >= 0x20 && c <= 0x3F) {
            if (params_.size() < kMaxParams) params_ += static_cast<char>(c);
            else params_ = std::string(kMaxParams, '?');  // too long: ignored when it ends
            return Event::None;
        }
        if (!control && c >= 0x40 && c <= 0x7E) {
            const bool ss3 = esc_ == Esc::Ss3;
            esc_ = Esc::None;
            if (!overflow_) on_sequence(static_cast<char>(c), ss3, echo, screen);
            return Event::None;
        }
        esc_ = Esc::None;  // a control byte (or a byte no sequence holds) ends the sequence
        if (!control) return Event::None;
    }
    if (c == '\n' && last_cr_) {  // CR LF ends one line
        last_cr_ = false;
        return Event::None;
    }
    last_cr_ = c == '\r';
    if (c < 0x20 || c == 0x7f) return on_control(c, echo, screen);
    if (!overflow_) on_text_byte(c, echo, screen);
    return Event::None;
}

LineEditor::Event LineEditor::on_control(unsigned char c, bool echo, std::string& screen) {
    if (c == 0x03) {  // Ctrl-C
        reset_line();
        return Event::Interrupt;
    }
    if (c == '\r' || c == '\n') {
        if (!overflow_) flush_pending(echo, screen);
        if (echo) screen += '\n';
        return finish();
    }
    if (overflow_) return Event::None;
    flush_pending(echo, screen);
    switch (c) {
        case 0x1b: esc_ = Esc::Start; break;
        case 0x7f:
        case 0x08:  // Backspace
            if (cur_ > 0) erase(cur_ - 1, cur_, echo, screen);
            break;
        case 0x04:  // Ctrl-D: Delete; on an empty line, the end of input
            if (cells_.empty()) return Event::EndOfInput;
            if (cur_ < cells_.size()) erase(cur_, cur_ + 1, echo, screen);
            break;
        case 0x01: move_to(0, echo, screen); break;              // Ctrl-A
        case 0x05: move_to(cells_.size(), echo, screen); break;  // Ctrl-E
        case 0x02: if (cur_ > 0) move_to(cur_ - 1, echo, screen); break;  // Ctrl-B
        case 0x06: if (cur_ < cells_.size()) move_to(cur_ + 1, echo, screen); break;  // Ctrl-F
        case 0x15: erase(0, cur_, echo, screen); break;              // Ctrl-U
        case 0x0b: erase(cur_, cells_.size(), echo, screen); break;  // Ctrl-K
        case 0x17: {  // Ctrl-W: the spaces before the cursor, then the word before them
            size_t from = cur_;
            while (from > 0 && is_space(cells_[from - 1].bytes)) --from;
            while (from > 0 && !is_space(cells_[from - 1].bytes)) --from;
            erase(from, cur_, echo, screen);
            break;
        }
        case 0x10: on_sequence('A', true, echo, screen); break;  // Ctrl-P: Up
        case 0x0e: on_sequence('B', true, echo, screen); break;  // Ctrl-N: Down
        case '\t': insert(Cell{" ", false}, echo, screen); break;
        default: break;  // any other control byte: ignored
    }
    return Event::None;
}

void LineEditor::on_sequence(char final_byte, bool ss3, bool echo, std::string& screen) {
    const Key k = key_of(final_byte, ss3 ? std::string() : params_, ss3);
    params_.clear();
    switch (k) {
        case Key::None: return;
        case Key::Left: if (cur_ > 0) move_to(cur_ - 1, echo, screen); return;
        case Key::Right: if (cur_ < cells_.size()) move_to(cur_ + 1, echo, screen); return;
        case Key::Home: move_to(0, echo, screen); return;
        case Key::End: move_to(cells_.size(), echo, screen); return;
        case Key::Delete: if (cur_ < cells_.size()) erase(cur_, cur_ + 1, echo, screen); return;
        case Key::Up:
            if (hist_pos_ == 0) return;
            if (hist_pos_ == history_.size()) draft_ = text();
            --hist_pos_;
            replace_all(history_[hist_pos_], echo, screen);
            return;
        case Key::Down:
            if (hist_pos_ >= history_.size()) return;
            ++hist_pos_;
            replace_all(hist_pos_ == history_.size() ? draft_ : history_[hist_pos_], echo, screen);
            return;
    }
}

void LineEditor::on_text_byte(unsigned char c, bool echo, std::string& screen) {
    if (!pending_.empty()) {
        if ((c & 0xC0) == 0x80) {
            pending_ += static_cast<char>(c);
            if (pending_.size() < pending_need_) return;
            size_t pos = 0;
            uint32_t cp = 0;
            if (utf8_next(pending_, pos, cp) && pos == pending_.size()) {
                Cell cell{pending_, false};
                pending_.clear();
                insert(std::move(cell), echo, screen);
            } else {
                flush_pending(echo, screen);  // overlong, a surrogate, above U+10FFFF
            }
            return;
        }
        flush_pending(echo, screen);
    }
    if (c < 0x80) return insert(Cell{std::string(1, static_cast<char>(c)), false}, echo, screen);
    pending_need_ = utf8_length(c);
    if (pending_need_ == 0) return insert(Cell{std::string(1, static_cast<char>(c)), true}, echo, screen);
    pending_ = std::string(1, static_cast<char>(c));
}

void LineEditor::flush_pending(bool echo, std::string& screen) {
    const std::string p = std::move(pending_);
    pending_.clear();
    for (char b : p) insert(Cell{std::string(1, b), true}, echo, screen);
}

void LineEditor::insert(Cell cell, bool echo, std::string& screen) {
    if (overflow_) return;
    if (nbytes_ + cell.bytes.size() > max_bytes_) {
        overflow_ = true;  // refused whole at Enter; nothing more is drawn
        return;
    }
    nbytes_ += cell.bytes.size();
    cells_.insert(cells_.begin() + static_cast<std::ptrdiff_t>(cur_), std::move(cell));
    ++cur_;
    if (!echo) return;
    for (size_t i = cur_ - 1; i < cells_.size(); ++i) draw(cells_[i], screen);
    screen.append(cells_.size() - cur_, '\b');
}

void LineEditor::erase(size_t from, size_t to, bool echo, std::string& screen) {
    if (from >= to) return;
    move_to(from, echo, screen);
    for (size_t i = from; i < to; ++i) nbytes_ -= cells_[i].bytes.size();
    cells_.erase(cells_.begin() + static_cast<std::ptrdiff_t>(from), cells_.begin() + static_cast<std::ptrdiff_t>(to));
    if (!echo) return;
    for (size_t i = from; i < cells_.size(); ++i) draw(cells_[i], screen);
    screen.append(to - from, ' ');
    screen.append(cells_.size() - from + (to - from), '\b');
}

void LineEditor::move_to(size_t pos, bool echo, std::string& screen) {
    if (echo) {
        if (pos < cur_) screen.append(cur_ - pos, '\b');
        for (size_t i = cur_; i < pos; ++i) draw(cells_[i], screen);  // moving right: draw what is there
    }
    cur_ = pos;
}

void LineEditor::replace_all(const std::string& text, bool echo, std::string& screen) {
    const size_t old_n = cells_.size();
    move_to(0, echo, screen);
    cells_.clear();
    nbytes_ = 0;
    for (size_t pos = 0; pos < text.size();) {
        const size_t from = pos;
        uint32_t cp = 0;
        const bool good = utf8_next(text, pos, cp);
        if (!good) pos = from + 1;
        cells_.push_back(Cell{text.substr(from, pos - from), !good});
        nbytes_ += pos - from;
    }
    cur_ = cells_.size();
    if (!echo) return;
    for (const Cell& c : cells_) draw(c, screen);
    if (old_n > cells_.size()) {
        screen.append(old_n - cells_.size(), ' ');
        screen.append(old_n - cells_.size(), '\b');
    }
}

LineEditor::Event LineEditor::finish() {
    done_ = text();
    done_overflow_ = overflow_;
    done_invalid_ = -1;
    size_t at = 0;
    for (const Cell& c : cells_) {
        if (c.bad) {
            done_invalid_ = static_cast<long>(at);
            break;
        }
        at += c.bytes.size();
    }
    if (!done_overflow_ && done_invalid_ < 0 && !done_.empty() && (history_.empty() || history_.back() != done_)) {
        history_.push_back(done_);
        if (history_.size() > max_history_) history_.pop_front();
    }
    reset_line();
    return Event::Line;
}

void LineEditor::reset_line() {
    cells_.clear();
    pending_.clear();
    cur_ = 0;
    nbytes_ = 0;
    overflow_ = false;
    hist_pos_ = history_.size();
    draft_.clear();
}

}  // namespace ember::fw
