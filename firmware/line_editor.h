// The console's line editor: a state machine over the bytes a terminal sends (keys, ANSI
// escape sequences) that keeps the line being typed and says what to draw. It does no I/O,
// so tests and the fuzzer drive it without a terminal.
//
// Keys (xterm, VT100, the Linux console, rxvt, picocom and minicom all send these):
//   Left/Right ESC[D ESC[C (ESC OD ESC OC; modifiers such as ESC[1;5D count as the plain key)
//   Home ESC[H ESC OH ESC[1~ ESC[7~, Ctrl-A;  End ESC[F ESC OF ESC[4~ ESC[8~, Ctrl-E
//   Backspace 0x7f or 0x08;  Delete ESC[3~;  Up/Down ESC[A ESC[B (ESC OA ESC OB): history
//   Ctrl-U deletes to the start, Ctrl-K to the end, Ctrl-W the word before the cursor
//   Ctrl-B/Ctrl-F move left/right, Ctrl-D deletes under the cursor (on an empty line: end of
//   input), Ctrl-P/Ctrl-N are Up/Down, Ctrl-C drops the line, CR or LF (CR LF once) ends it.
// Any other escape sequence (CSI with any parameters, SS3, ESC + one character: an Alt-key,
// all of its UTF-8 bytes) and any other control byte is ignored; a tab is a space. So are
// control strings (OSC ESC ], DCS ESC P, SOS ESC X, PM ESC ^, APC ESC _: a terminal's answer
// to a query), up to ST (ESC \) or BEL, CAN or SUB; CR, LF, Ctrl-C or 256 bytes end one too.
// Sequences follow ECMA-48 (5th ed., 5.4 and 8.3.2): CSI = ESC [ parameters 0x30-0x3F,
// intermediates 0x20-0x2F, final 0x40-0x7E.
//
// The cursor moves by whole characters (UTF-8 code points; each is taken to fill one cell).
// A byte that is not part of valid UTF-8 stays in the line as it came, is drawn as U+FFFD and
// makes the line invalid (invalid_at()). The screen output assumes a cursor at the end of the
// prompt when the line starts and uses only the characters themselves, spaces and BS (0x08)
// to move left, so what the terminal shows is the line handed back. Lines are drawn on one
// row: a line wider than the terminal wraps, and BS does not go back over a wrap.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

namespace ember::fw {

class LineEditor {
public:
    enum class Event {
        None,       // the byte was taken (maybe drawn); the line goes on
        Line,       // Enter: line() holds the line (overflow() says if it was too long)
        Interrupt,  // Ctrl-C: the line was dropped
        EndOfInput, // Ctrl-D on an empty line (a terminal's end of input)
    };

    // max_bytes: a longer line is refused whole (overflow()); history: lines kept for Up/Down.
    explicit LineEditor(size_t max_bytes, size_t history = 50);

    // Takes one byte from the terminal. When echo is on, appends to `screen` the bytes that
    // show the change. After Event::Line or Event::Interrupt the next byte starts a new line.
    Event feed(char byte, bool echo, std::string& screen);

    // After Event::Line: the line's bytes, whether more than max_bytes were typed, and the byte
    // offset of the first byte that is not valid UTF-8 (-1: none).
    const std::string& line() const { return done_; }
    bool overflow() const { return done_overflow_; }
    long invalid_at() const { return done_invalid_; }

    // While a line is typed: its bytes and the cursor (in characters from the start).
    std::string text() const;
    std::string shown() const;  // the line as drawn: each byte that is not valid UTF-8 as U+FFFD
    size_t cursor() const { return cur_; }
    size_t history_size() const { return history_.size(); }

private:
    struct Cell {
        std::string bytes;  // one code point, or one byte that is not valid UTF-8
        bool bad = false;
    };
    enum class Esc { None, Start, Csi, Ss3, String, StringEsc, AltChar };

    Event on_control(unsigned char c, bool echo, std::string& screen);
    void on_sequence(char final_byte, bool ss3, bool echo, std::string& screen);
    void on_text_byte(unsigned char c, bool echo, std::string& screen);
    void flush_pending(bool echo, std::string& screen);  // an incomplete UTF-8 sequence ends: bad bytes
    void insert(Cell cell, bool echo, std::string& screen);
    void erase(size_t from, size_t to, bool echo, std::string& screen);  // cells [from, to); cursor to `from`
    void move_to(size_t pos, bool echo, std::string& screen);
    void replace_all(const std::string& text, bool echo, std::string& screen);  // history recall
    Event finish();
    void reset_line();  // an empty line, history at the newest
    static void draw(const Cell& c, std::string& screen);

    size_t max_bytes_, max_history_;
    std::vector<Cell> cells_;
    size_t cur_ = 0;               // cursor, in cells
    size_t nbytes_ = 0;            // bytes in cells_
    bool overflow_ = false;        // more than max_bytes_ typed: the rest of the line is ignored
    std::string pending_;          // the first bytes of a UTF-8 sequence
    size_t pending_need_ = 0;      // its full length
    Esc esc_ = Esc::None;
    std::string params_;           // CSI parameter and intermediate bytes (bounded)
    size_t esc_left_ = 0;          // AltChar: continuation bytes still to skip; String: bytes so far
    bool last_cr_ = false;         // the line ended with CR: a following LF is part of it
    std::deque<std::string> history_;  // oldest first
    size_t hist_pos_ = 0;          // == history_.size(): the line being typed
    std::string draft_;            // the line being typed, while history is shown
    std::string done_;
    bool done_overflow_ = false;
    long done_invalid_ = -1;
};

}  // namespace ember::fw
