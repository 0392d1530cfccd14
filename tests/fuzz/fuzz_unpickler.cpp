// libFuzzer: the restricted unpickler on arbitrary bytes. Any input ends in a value or an
// ember::Error; a crash, a leak or undefined behaviour is a finding.
#include <cstddef>
#include <cstdint>

#include "converter/unpickler.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        ember::convert::pickle::unpickle(data, size, "fuzz");
    } catch (const ember::Error&) {
    }
    return 0;
}
