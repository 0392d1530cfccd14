// libFuzzer: read_meta_pkl (nanoGPT's vocabulary pickle) on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "converter/checkpoint.h"
#include "fuzz_util.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = ember::fuzz::input_file(data, size, ".pkl");
    try {
        ember::convert::read_meta_pkl(path);
    } catch (const ember::Error&) {
    }
    return 0;
}
