// libFuzzer: the console's line parser on arbitrary bytes (what a person or a noisy line
// types). Every line gets a verdict; an error is one printable line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "firmware/console_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const ember::fw::ParseResult r = ember::fw::parse_command(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!r.ok && (r.error.empty() || r.error.find('\n') != std::string::npos)) __builtin_trap();
    return 0;
}
