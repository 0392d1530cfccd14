// libFuzzer: Hugging Face tokenizers' tokenizer.json (converter/gpt2_tokenizer.cpp) on arbitrary
// bytes: read_gpt2_tokenizer either throws ember::Error (any other exception escapes and is a
// finding) or returns a BPE that passed verify_bpe; that BPE then encodes a fixed text whose ids
// are in range and whose bytes give the text back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "converter/gpt2_tokenizer.h"
#include "runtime/bpe.h"
#include "runtime/error.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = ember::fuzz::input_file(data, size, "-tokenizer.json");
    ember::BpeData d;
    try {
        d = ember::convert::read_gpt2_tokenizer({path});
    } catch (const ember::Error&) {
        return 0;
    }
    const ember::BpeTokenizer tok(std::move(d));
    const std::string text = "Hello, world! It's 2026.\n  \xC3\xA9t\xC3\xA9 <|endoftext|>";
    std::vector<int> ids;
    try {
        ids = tok.encode(text, "fuzz");
    } catch (const ember::Error&) {
        return 0;  // a vocabulary without every byte cannot encode everything
    }
    std::string back;
    for (int id : ids) {
        if (id < 0 || id >= tok.size()) __builtin_trap();
        back += tok.token_bytes(id);
    }
    if (back != text) __builtin_trap();
    return 0;
}
