// Conversions between f32 and the 16-bit float formats bf16 and f16.
#ifndef MEGRT_HALFFLOAT_H
#define MEGRT_HALFFLOAT_H

#include <cstdint>

namespace megrt {

/// Rounds to nearest, ties to even; NaN stays NaN (quiet), overflow rounds to
/// infinity.
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t bits);

/// IEEE binary16. Rounds to nearest, ties to even, including into and out of
/// the subnormal range; NaN stays NaN (quiet).
uint16_t floatToF16(float value);
float f16ToFloat(uint16_t bits);

} // namespace megrt

#endif // MEGRT_HALFFLOAT_H
