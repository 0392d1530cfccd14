// libFuzzer: GPT-2's byte-level BPE with the real tables (tests/fixtures/gpt2/tokenizer/) and
// the UTF-8 text stream, on arbitrary bytes (prompts, eval texts, token bytes):
// - encode: valid UTF-8 gives ids whose bytes are the input again; invalid UTF-8 an ember::Error;
// - Utf8Stream: the input fed in pieces (sizes from the first byte) gives exactly
//   utf8_decode_replace of the whole, as do the bytes of the ids the input's pairs of bytes name.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "converter/gpt2_tokenizer.h"
#include "runtime/bpe.h"
#include "runtime/error.h"
#include "runtime/text_stream.h"

namespace {

const ember::BpeTokenizer& gpt2() {
    static const ember::BpeTokenizer tok(
        ember::convert::read_gpt2_tokenizer({std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/gpt2/tokenizer"}));
    return tok;
}

// Streams `pieces` through s; the concatenated output.
template <class Pieces>
std::string stream(ember::Utf8Stream& s, Pieces pieces) {
    std::string out;
    pieces([&](const char* p, size_t n) { out += s.feed(p, n); });
    out += s.finish();
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const ember::BpeTokenizer& tok = gpt2();
    const size_t piece = 1 + data[0] % 8;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

    try {
        const std::vector<int> ids = tok.encode(text, "fuzz");
        std::string back;
        for (int id : ids) {
            if (id < 0 || id >= tok.size()) __builtin_trap();
            back += tok.token_bytes(id);
        }
        if (back != text) __builtin_trap();  // encoding loses or adds nothing
    } catch (const ember::Error&) {
    }

    const std::string whole = ember::utf8_decode_replace(text);
    ember::Utf8Stream s(static_cast<size_t>(tok.max_token_bytes()));
    const std::string streamed = stream(s, [&](auto feed) {
        for (size_t i = 0; i < text.size(); i += piece) feed(text.data() + i, std::min(piece, text.size() - i));
    });
    if (streamed != whole) __builtin_trap();

    // Ids from pairs of input bytes, their bytes streamed token by token.
    std::string bytes;
    for (size_t i = 0; i + 1 < text.size(); i += 2) {
        const int id = (static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1])) % tok.size();
        bytes += tok.token_bytes(id);
    }
    const std::string by_token = stream(s, [&](auto feed) {
        for (size_t i = 0; i + 1 < text.size(); i += 2) {
            const int id = (static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1])) % tok.size();
            const std::string_view b = tok.token_bytes(id);
            feed(b.data(), b.size());
        }
    });
    if (by_token != ember::utf8_decode_replace(bytes)) __builtin_trap();
    return 0;
}
