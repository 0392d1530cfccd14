// libFuzzer: the console's line editor (firmware/line_editor.h) on arbitrary bytes, drawing on
// the test's model terminal (tests/firmware/term_model.h). After every byte: the editor draws
// only characters, spaces, BS and LF; the model's cursor is the editor's; the row shows the
// line (bytes that are not UTF-8 as U+FFFD); a line never exceeds its limit; a line handed
// back without bad bytes is exactly what the row showed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "firmware/line_editor.h"
#include "tests/firmware/term_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using ember::fw::LineEditor;
    constexpr size_t kMax = 64;  // small, so that overflow is reached
    LineEditor ed(kMax, 5);
    ember::fwtest::TermModel term("> ");
    std::string screen;
    for (size_t i = 0; i < size; ++i) {
        screen.clear();
        const LineEditor::Event ev = ed.feed(static_cast<char>(data[i]), true, screen);
        term.feed(screen);
        if (term.broken()) __builtin_trap();
        if (ev == LineEditor::Event::Line) {
            if (ed.line().size() > kMax) __builtin_trap();
            if (!ed.overflow() && ed.invalid_at() < 0 && term.rows().back() != ember::fwtest::trim_right("> " + ed.line())) __builtin_trap();
            term = ember::fwtest::TermModel("> ");
        } else if (ev == LineEditor::Event::Interrupt) {
            term = ember::fwtest::TermModel("> ");
        } else {
            if (ed.text().size() > kMax) __builtin_trap();
            if (term.col() != 2 + ed.cursor()) __builtin_trap();
            if (term.text() != ember::fwtest::trim_right("> " + ed.shown())) __builtin_trap();
        }
    }
    return 0;
}
