// libFuzzer: the safetensors reader on arbitrary bytes (the 8-byte header length, the JSON
// header, dtypes, shapes and data_offsets against the file), then the architecture mapping of
// whatever it read. Any input ends in a checkpoint or an ember::Error.
#include <cstddef>
#include <cstdint>

#include "converter/arch.h"
#include "converter/safetensors.h"
#include "fuzz_util.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = ember::fuzz::input_file(data, size, ".safetensors");
    try {
        ember::convert::Checkpoint c = ember::convert::read_safetensors(path);
        for (const auto& [name, t] : c.tensors) {
            uint64_t n = 1;
            for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
            if (n != t.values.size()) __builtin_trap();  // shape and values must agree
        }
        ember::convert::to_canonical(std::move(c), ember::convert::ArchChoice::Auto, path);
    } catch (const ember::Error&) {
    }
    return 0;
}
