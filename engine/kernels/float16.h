// IEEE half (F16) and bfloat16 (BF16) to float32 with integer bit operations only:
// Emscripten 3.1.6 has no _Float16, and bit manipulation gives the same result everywhere.
#pragma once

#include <cstdint>
#include <cstring>

namespace gpt2 {

inline float bits_to_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline float bf16_to_float(uint16_t h) {
    // bfloat16 is the top half of a float32: subnormals, inf and nan carry over unchanged
    return bits_to_float(uint32_t(h) << 16);
}

inline float f16_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0x1F)  // inf (mantissa 0) or nan (payload kept)
        return bits_to_float(sign | 0x7F800000u | (mantissa << 13));
    if (exponent != 0)  // normal: rebias 15 -> 127
        return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0) return bits_to_float(sign);  // signed zero
    // subnormal: mantissa * 2^-24; shift until the implicit bit (0x400) appears, every float32 is normal here
    uint32_t shift = 0;
    while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        shift++;
    }
    return bits_to_float(sign | ((113u - shift) << 23) | ((mantissa & 0x3FFu) << 13));
}

// The half whose value f is, for every f that f16_to_float returned: its exact inverse, NaN payloads included
// (the storage of the block formats widens the file's fp16 scales, and hands the file's bytes back).
inline uint16_t f16_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
    const uint32_t exponent = (bits >> 23) & 0xFFu, mantissa = bits & 0x7FFFFFu;
    if (exponent == 0xFF) return uint16_t(sign | 0x7C00u | (mantissa >> 13));  // inf, nan
    if (exponent == 0) return sign;                                            // signed zero
    if (exponent >= 113) return uint16_t(sign | ((exponent - 112u) << 10) | (mantissa >> 13));
    // an fp16 subnormal: (1.mantissa) 2^(exponent - 127) = m 2^-24
    return uint16_t(sign | ((0x800000u | mantissa) >> (126u - exponent)));
}

inline void put_f16(uint8_t* p, float f) {
    const uint16_t h = f16_bits(f);
    p[0] = uint8_t(h);
    p[1] = uint8_t(h >> 8);
}

// The little-endian half at p (a block's fp16 scale in a GGUF file) as float32.
inline float f16_at(const uint8_t* p) { return f16_to_float(uint16_t(p[0] | p[1] << 8)); }

}  // namespace gpt2
