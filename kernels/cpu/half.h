// IEEE 754 binary16 <-> binary32 conversion (round to nearest even), as torch.Tensor.half()
// and .float() compute it. Scalar code: used by the converter and the reference kernels;
// the fast kernels use F16C where the CPU has it.
#pragma once

#include <cstdint>
#include <cstring>

namespace ember::kernels {

inline float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalize
            int e = -1;
            do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
            bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {  // inf or NaN
        return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: inf
    if (ax < 0x38800000u) {  // below the smallest normal half: subnormal or zero
        if (ax < 0x33000000u) return sign;  // rounds to zero
        const uint32_t e = ax >> 23;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        // x = m * 2^(e - 150); in half's subnormal unit 2^-24 that is m * 2^(e - 126).
        const uint32_t shift = 126 - e;
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return sign | static_cast<uint16_t>(q);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);  // round to nearest even at bit 13
    r -= 0x38000000u;  // rebias exponent 127 -> 15
    return sign | static_cast<uint16_t>(r >> 13);
}

// bfloat16 (upper 16 bits of a binary32) to float, as torch's .float() does.
inline float bf16_to_float(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

}  // namespace ember::kernels
