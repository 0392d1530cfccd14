// The console's line editor (firmware/line_editor.h) without a terminal: each key's edit, the
// escape sequences it ignores, history, UTF-8, and, for random key sequences, that what its
// screen output shows on a model terminal (term_model.h) is the line it hands to the parser.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "firmware/console.h"
#include "firmware/line_editor.h"
#include "term_model.h"

using namespace ember::fw;
using namespace ember::fwtest;

namespace {

const std::string kLeft = "\x1b[D", kRight = "\x1b[C", kUp = "\x1b[A", kDown = "\x1b[B", kDel = "\x1b[3~";

// Feeds `keys` (echo off) and returns the lines handed back, in order.
std::vector<std::string> lines_of(LineEditor& ed, const std::string& keys) {
    std::vector<std::string> out;
    std::string screen;
    for (char c : keys)
        if (ed.feed(c, false, screen) == LineEditor::Event::Line) out.push_back(ed.line());
    CHECK(screen.empty());  // echo off: nothing drawn
    return out;
}

std::string line_of(const std::string& keys) {
    LineEditor ed(kMaxLine);
    const auto l = lines_of(ed, keys + "\r");
    REQUIRE(l.size() == 1);
    return l[0];
}

std::string drawn(LineEditor& ed, const std::string& keys) {
    std::string screen;
    for (char c : keys) ed.feed(c, true, screen);
    return screen;
}

}  // namespace

TEST_CASE("line editor: left, right, Home, End in every common encoding, Backspace, Delete") {
    CHECK(line_of("abc" + kLeft + kLeft + "X") == "aXbc");
    CHECK(line_of("abc" + kLeft + kLeft + kRight + "X") == "abXc");
    CHECK(line_of("abc\x1bOD\x1bODX") == "aXbc");  // SS3 (application cursor keys)
    CHECK(line_of("ab\x1b[1;5DX") == "aXb");        // with a modifier: the plain key
    for (const std::string home : {"\x1b[H", "\x1bOH", "\x1b[1~", "\x1b[7~", "\x01"}) {
        CAPTURE(home);
        CHECK(line_of("bc" + home + "a") == "abc");
    }
    for (const std::string end : {"\x1b[F", "\x1bOF", "\x1b[4~", "\x1b[8~", "\x05"}) {
        CAPTURE(end);
        CHECK(line_of("ac" + kLeft + kLeft + end + "d") == "acd");
    }
    CHECK(line_of("abc\x7f") == "ab");
    CHECK(line_of("abc\x08\x08") == "a");
    CHECK(line_of("\x7f\x7f" "a") == "a");  // nothing to delete
    CHECK(line_of("abc\x01" + kDel) == "bc");
    CHECK(line_of("abc" + kDel) == "abc");  // at the end: nothing
    CHECK(line_of("abc\x01\x04") == "bc");  // Ctrl-D deletes under the cursor
    {
        LineEditor ed(kMaxLine);
        std::string screen;
        CHECK(ed.feed('\x04', false, screen) == LineEditor::Event::EndOfInput);  // on an empty line: the end
        CHECK(lines_of(ed, "a\x04\r") == std::vector<std::string>{"a"});
    }
    CHECK(line_of("ac\x02" "b\x06" "d") == "abcd");  // Ctrl-B, Ctrl-F
    CHECK(line_of("a\tb") == "a b");
}

TEST_CASE("line editor: Ctrl-U, Ctrl-K and Ctrl-W cut as readline's do") {
    CHECK(line_of("abc def" + kLeft + kLeft + kLeft + "\x15") == "def");
    CHECK(line_of("abc def" + kLeft + kLeft + kLeft + "\x0b") == "abc ");
    CHECK(line_of("abc def\x01\x0b") == "");
    CHECK(line_of("gen -n 5 hello\x17") == "gen -n 5 ");
    CHECK(line_of("gen -n 5 hello  \x17") == "gen -n 5 ");  // the spaces, then the word
    CHECK(line_of("one two three" + kLeft + kLeft + kLeft + kLeft + kLeft + "\x17") == "one three");
    CHECK(line_of("\x17\x15\x0b" "a") == "a");  // on an empty line: nothing
}

TEST_CASE("line editor: unknown escape sequences and control bytes are ignored, never typed") {
    const std::string ignored[] = {"\x1b[2~", "\x1b[5~", "\x1b[6~", "\x1b[15~", "\x1b[24~", "\x1b[?25h", "\x1b[?1;2c", "\x1b[5D",
                                   "\x1b[1;5P", "\x1bOP", "\x1bOS", "\x1bx", "\x1b[200~", "\x1b[201~", "\x1b[38;5;196m", "\x1b[ q",
                                   "\x1b[" + std::string(100, '1') + "D", "\x1b\x1b[Z", "\x00", "\x07", "\x0c", "\x1a", "\x1c", "\x1f"};
    for (const std::string& seq : ignored) {
        CAPTURE(seq);
        CHECK(line_of("a" + seq + "b") == "ab");
    }
    // A lone ESC, then Enter: the line still ends (a control byte ends any sequence).
    CHECK(line_of("ab\x1b") == "ab");
    LineEditor ed(kMaxLine);
    CHECK(lines_of(ed, "ab\x1b[\rcd\x1bO\n") == std::vector<std::string>{"ab", "cd"});
    // Ctrl-C inside a sequence still drops the line.
    std::string screen;
    for (char c : std::string("xy\x1b[1")) ed.feed(c, false, screen);
    CHECK(ed.feed('\x03', false, screen) == LineEditor::Event::Interrupt);
    CHECK(ed.text().empty());
    CHECK(lines_of(ed, "D\r") == std::vector<std::string>{"D"});
}

TEST_CASE("line editor: a terminal's answers (OSC, DCS, SOS, PM, APC strings) and Alt with a UTF-8 character are ignored whole") {
    // These used to be typed: OSC's text ("0;title"), DCS's ("xxxx"), and an Alt-key's UTF-8
    // continuation bytes (a bad byte: "not valid UTF-8").
    const std::string ignored[] = {
        "\x1b]0;title\x07",                        // OSC ended by BEL (xterm's window title)
        "\x1b]11;rgb:0000/0000/0000\x1b\\",        // OSC ended by ST: the answer to a colour query
        "\x1bPxxxx\x1b\\", "\x1bP1$r0m\x1b\\",     // DCS (DECRQSS's answer)
        "\x1bXsos\x1b\\", "\x1b^pm\x1b\\", "\x1b_apc\x1b\\",  // SOS, PM, APC
        "\x1b]52;c;\x1b[Dx\x07",                    // an ESC inside a string that is not ST
        "\x1b]0;cancelled\x18", "\x1b]0;cancelled\x1a",  // CAN and SUB cancel a string
        "\x1b\xc3\xa9", "\x1b\xe2\x82\xac", "\x1b\xf0\x9f\x98\x80",  // Alt + e-acute, Alt + euro, Alt + an emoji
    };
    for (const std::string& seq : ignored) {
        CAPTURE(seq);
        CHECK(line_of("in" + seq + "fo") == "info");
    }
    // Enter ends a string that never ended, and the line with it: a stray ESC ] cannot eat what
    // is typed after it; neither can a string longer than 256 bytes.
    LineEditor ed(kMaxLine);
    CHECK(lines_of(ed, "ab\x1b]unended\rcd\r") == std::vector<std::string>{"ab", "cd"});
    CHECK(line_of("\x1b]" + std::string(256, 'z') + "info") == "info");
    // An Alt-key whose character is cut short: the next byte is typed.
    CHECK(line_of("\x1b\xe2\x82x") == "x");
}

TEST_CASE("line editor: Enter is CR, LF or CR LF, Ctrl-C drops the line") {
    LineEditor ed(kMaxLine);
    CHECK(lines_of(ed, "a\r\nb\nc\r\rd\n\n") == std::vector<std::string>{"a", "b", "c", "", "d", ""});
    std::string screen;
    for (char c : std::string("half")) ed.feed(c, false, screen);
    CHECK(ed.feed('\x03', false, screen) == LineEditor::Event::Interrupt);
    CHECK(lines_of(ed, "x\r") == std::vector<std::string>{"x"});
}

TEST_CASE("line editor: the cursor moves by whole UTF-8 characters, bad bytes are kept and reported") {
    CHECK(line_of("caf\xc3\xa9" + kLeft + "X") == "cafX\xc3\xa9");
    CHECK(line_of("\xe2\x82\xac\xf0\x9f\x98\x80" + kLeft + kLeft + "a") == "a\xe2\x82\xac\xf0\x9f\x98\x80");
    CHECK(line_of("x\xf0\x9f\x98\x80\x7f") == "x");  // one Backspace, one character of 4 bytes
    CHECK(line_of("ab\xc3\xa9" "\x01" + kDel + kDel + kDel) == "");
    LineEditor ed(kMaxLine);
    lines_of(ed, "gen \xc3\x28\r");
    CHECK(ed.line() == "gen \xc3\x28");  // as typed: the console refuses it with the parser's words
    CHECK(ed.invalid_at() == 4);
    lines_of(ed, "\xff" "a\r");
    CHECK(ed.invalid_at() == 0);
    lines_of(ed, "ok\r");
    CHECK(ed.invalid_at() == -1);
    lines_of(ed, "\xe0\x80\x80\r");  // overlong: three bad bytes
    CHECK(ed.invalid_at() == 0);
    // A character split over two reads is one character.
    std::string screen;
    for (char c : std::string("caf\xc3")) ed.feed(c, true, screen);
    CHECK(screen == "caf");
    ed.feed('\xa9', true, screen);
    CHECK(screen == "caf\xc3\xa9");
}

TEST_CASE("line editor: what it draws, byte for byte") {
    LineEditor ed(kMaxLine);
    CHECK(drawn(ed, "ab") == "ab");
    CHECK(drawn(ed, kLeft) == "\b");
    CHECK(drawn(ed, "X") == "Xb\b");              // insert: the rest of the line is drawn again
    CHECK(drawn(ed, kRight) == "b");              // right: the character under the cursor
    CHECK(drawn(ed, "\x7f") == "\b \b");          // Backspace at the end
    CHECK(drawn(ed, "\x01") == "\b\b");           // Home
    CHECK(drawn(ed, kDel) == "X \b\b");           // Delete: the rest, a blank, back
    CHECK(drawn(ed, "\r") == "\n");
    CHECK(drawn(ed, "\xff") == "\xEF\xBF\xBD");   // a bad byte is drawn as U+FFFD
}

TEST_CASE("line editor: up and down walk a history of the last 50 lines, the line being typed is kept") {
    LineEditor ed(kMaxLine);
    lines_of(ed, "one\rtwo\rthree\r");
    CHECK(ed.history_size() == 3);
    CHECK(lines_of(ed, kUp + "\r") == std::vector<std::string>{"three"});
    CHECK(ed.history_size() == 3);  // "three" again is not stored twice
    CHECK(lines_of(ed, kUp + kUp + "\r") == std::vector<std::string>{"two"});
    CHECK(ed.history_size() == 4);  // one two three two
    CHECK(lines_of(ed, kUp + kUp + kUp + kUp + kUp + kUp + "\r") == std::vector<std::string>{"one"});  // stops at the oldest
    CHECK(lines_of(ed, "dr" + kUp + kUp + kDown + kDown + "aft\r") == std::vector<std::string>{"draft"});
    CHECK(lines_of(ed, "\x1bOA\x10\x0e\r") == std::vector<std::string>{"draft"});  // SS3 up, Ctrl-P, Ctrl-N
    CHECK(lines_of(ed, kUp + "\x17" "edited\r") == std::vector<std::string>{"edited"});
    CHECK(lines_of(ed, kDown + kDown + "\r") == std::vector<std::string>{""});  // below the newest: the empty draft
    LineEditor full(kMaxLine);
    for (int i = 0; i < 60; ++i) lines_of(full, "line " + std::to_string(i) + "\r");
    CHECK(full.history_size() == 50);
    std::string keys;
    for (int i = 0; i < 70; ++i) keys += kUp;
    CHECK(lines_of(full, keys + "\r") == std::vector<std::string>{"line 10"});
    // Lines that were refused (too long, bad UTF-8) are not kept.
    LineEditor ed2(8);
    lines_of(ed2, "123456789\r\xff\rok\r");
    CHECK(ed2.history_size() == 1);
}

TEST_CASE("line editor: a line over the limit is refused whole, the next one is fine") {
    LineEditor ed(kMaxLine);
    std::string screen;
    for (size_t i = 0; i < kMaxLine; ++i) ed.feed('a', false, screen);
    CHECK(ed.text().size() == kMaxLine);
    ed.feed('b', true, screen);
    CHECK(screen.empty());  // nothing more is drawn
    CHECK(ed.feed('\r', false, screen) == LineEditor::Event::Line);
    CHECK(ed.overflow());
    CHECK(ed.line().size() == kMaxLine);
    CHECK(lines_of(ed, "next\r") == std::vector<std::string>{"next"});
    CHECK(!ed.overflow());
}

TEST_CASE("line editor: for random key sequences, the screen shows exactly the line that is parsed") {
    const std::vector<std::string> keys = {
        "a", "b", "z", "0", "-", " ", " ", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\t",
        kLeft, kRight, kLeft, kRight, kUp, kDown, kDel, "\x1bOD", "\x1bOC", "\x1b[1;5D",
        "\x1b[H", "\x1b[F", "\x1b[1~", "\x1b[4~", "\x1bOH", "\x1bOF", "\x1b[7~", "\x1b[8~",
        "\x7f", "\x08", "\x01", "\x05", "\x15", "\x17", "\x0b", "\x02", "\x06", "\x04", "\x10", "\x0e",
        "\x1b[2~", "\x1b[5~", "\x1b[?25l", "\x1bOP", "\x1bq", "\x07", "\xff", "\xc3(", "\xe2\x82",
        "\r", "\n", "\r\n", "\x03",
    };
    std::mt19937 rng(20261201);
    int lines = 0, checks = 0;
    for (int seq = 0; seq < 300; ++seq) {
        LineEditor ed(64, 5);  // small: overflow and history limits are reached too
        TermModel term("> ");
        const int n = 1 + static_cast<int>(rng() % 120);
        std::string trail;  // the keys so far, for a failure's report
        for (int i = 0; i < n; ++i) {
            const std::string& k = keys[rng() % keys.size()];
            trail += k;
            LineEditor::Event ev = LineEditor::Event::None;
            for (char c : k) {
                std::string screen;
                const LineEditor::Event e = ed.feed(c, true, screen);
                term.feed(screen);
                if (e != LineEditor::Event::None) ev = e;
            }
            CAPTURE(ember::printable(trail, 2000));
            REQUIRE(!term.broken());
            if (ev == LineEditor::Event::Line) {
                ++lines;
                REQUIRE(!term.rows().empty());
                if (!ed.overflow()) {
                    // A line with bytes that are not UTF-8 is refused; the screen shows U+FFFD for them.
                    if (ed.invalid_at() < 0) CHECK(term.rows().back() == trim_right("> " + ed.line()));
                    else CHECK(term.rows().back().find("\xEF\xBF\xBD") != std::string::npos);
                }
                term = TermModel("> ");  // the console prints the prompt again
            } else if (ev == LineEditor::Event::Interrupt) {
                term.feed("^C\n> ");
                term = TermModel("> ");
            } else {
                REQUIRE(term.col() == 2 + ed.cursor());
                REQUIRE(term.text() == trim_right("> " + ed.shown()));
                ++checks;
            }
        }
    }
    CHECK(lines > 100);
    CHECK(checks > 5000);
}
