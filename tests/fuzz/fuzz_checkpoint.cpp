// libFuzzer: read_checkpoint (zip + unpickler + tensor views, or safetensors) on arbitrary
// bytes, then the architecture mapping of whatever it read.
#include <cstddef>
#include <cstdint>

#include "converter/arch.h"
#include "converter/checkpoint.h"
#include "fuzz_util.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = ember::fuzz::input_file(data, size, ".pt");
    try {
        ember::convert::Checkpoint c = ember::convert::read_checkpoint(path);
        ember::convert::to_canonical(std::move(c), ember::convert::ArchChoice::Auto, path);
    } catch (const ember::Error&) {
    }
    return 0;
}
