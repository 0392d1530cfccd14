// Decoding the element types a source checkpoint stores (little-endian f32, f16, bf16) to f32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "converter/checkpoint.h"

namespace ember::convert {

// Bytes per element of `d` in the source file: 4, 2 or 2.
size_t source_dtype_size(SourceDType d);

// Reads one little-endian element of type `d` at `src` as f32 (exact for all three types,
// infinities and NaNs kept).
float decode_source_value(SourceDType d, const uint8_t* src);

// IEEE binary16 bits to f32 (subnormals, infinities and NaNs exact).
float half_bits_to_float(uint16_t h);

}  // namespace ember::convert
