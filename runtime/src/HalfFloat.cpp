// Conversions between f32 and the 16-bit float formats bf16 and f16.
#include "megrt/HalfFloat.h"

#include <cstring>

namespace megrt {
namespace {
uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
} // namespace

uint16_t floatToBf16(float value) {
  uint32_t bits = bitsOf(value);
  // Rounding a NaN with the bias below could carry it into infinity.
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

float bf16ToFloat(uint16_t bits) {
  return floatOf(static_cast<uint32_t>(bits) << 16);
}

uint16_t floatToF16(float value) {
  uint32_t bits = bitsOf(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  // 65520 is halfway between the largest f16 (65504, odd mantissa) and
  // 65536, so ties-to-even sends it and everything above to infinity.
  if (magnitude >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) {
    // Rebias the exponent from 127 to 15; a mantissa carry correctly bumps
    // the exponent.
    uint32_t rebased = magnitude - (112u << 23);
    rebased += 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rebased >> 13));
  }
  // Below 2^-14 the result is subnormal: adding 0.5 (whose ulp is 2^-24, the
  // f16 subnormal step) makes the FPU round to nearest even for us.
  float shifted = floatOf(magnitude) + 0.5f;
  return static_cast<uint16_t>(sign | (bitsOf(shifted) - 0x3f000000u));
}

float f16ToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0)
    return floatOf(sign | bitsOf(static_cast<float>(mantissa) * 0x1p-24f));
  if (exponent == 31)
    return floatOf(sign | 0x7f800000u | (mantissa << 13));
  return floatOf(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

} // namespace megrt
