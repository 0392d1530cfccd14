#include "converter/source_values.h"

#include <cstring>

namespace ember::convert {

namespace {
float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
}  // namespace

size_t source_dtype_size(SourceDType d) {
    return d == SourceDType::F32 ? 4 : 2;
}

float half_bits_to_float(uint16_t h) {
    const uint32_t sign = uint32_t{h & 0x8000u} << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return bits_to_float(sign);  // +-0
    // Subnormal: normalise the mantissa.
    int e = -1;
    do {
        mant <<= 1;
        ++e;
    } while ((mant & 0x400u) == 0);
    return bits_to_float(sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13));
}

float decode_source_value(SourceDType d, const uint8_t* src) {
    switch (d) {
        case SourceDType::F32:
            return bits_to_float(uint32_t{src[0]} | uint32_t{src[1]} << 8 | uint32_t{src[2]} << 16 |
                                 uint32_t{src[3]} << 24);
        case SourceDType::F16:
            return half_bits_to_float(static_cast<uint16_t>(src[0] | src[1] << 8));
        case SourceDType::BF16:
            return bits_to_float((uint32_t{src[0]} | uint32_t{src[1]} << 8) << 16);
    }
    return 0.0f;
}

}  // namespace ember::convert
