// libFuzzer: UTF-8 decoding and the char tokenizer on arbitrary bytes (prompts, eval texts).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/error.h"
#include "runtime/tokenizer.h"
#include "runtime/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const ember::CharTokenizer tok({'\n', ' ', '!', 'A', 'a', 'z', 0xE9, 0x20AC, 0x1F600});
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto ids = tok.encode(text, "fuzz");
        if (tok.decode(ids) != text) __builtin_trap();  // encode then decode must round-trip
    } catch (const ember::Error&) {
    }
    try {
        ember::utf8_decode(text, "fuzz");
    } catch (const ember::Error&) {
    }
    (void)ember::printable(text);
    return 0;
}
