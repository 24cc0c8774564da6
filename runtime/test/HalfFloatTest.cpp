// bf16 and f16 conversions: exhaustive round trips and rounding edge cases.
#include "megrt/HalfFloat.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <map>

namespace megrt::test {
namespace {

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

TEST(HalfFloat, F16DecodesKnownValues) {
  EXPECT_EQ(f16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(f16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(f16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(f16ToFloat(0x0400), 0x1p-14f);
  EXPECT_EQ(f16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x7c00), INFINITY);
  EXPECT_EQ(f16ToFloat(0xfc00), -INFINITY);
  EXPECT_TRUE(std::signbit(f16ToFloat(0x8000)));
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7e00)));
}

TEST(HalfFloat, EveryF16RoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = f16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value))
      EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(value)))) << bits;
    else
      ASSERT_EQ(floatToF16(value), bits) << bits;
  }
}

TEST(HalfFloat, EveryBf16RoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = bf16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(value)))) << bits;
    else
      ASSERT_EQ(floatToBf16(value), bits) << bits;
  }
}

TEST(HalfFloat, F16RoundsToNearestEven) {
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f), 0x3c00);     // tie, even stays
  EXPECT_EQ(floatToF16(1.0f + 3 * 0x1p-11f), 0x3c02); // tie, rounds up
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(floatToF16(65519.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00);
  EXPECT_EQ(floatToF16(-1e9f), 0xfc00);
  EXPECT_EQ(floatToF16(0x1p-25f), 0x0000);     // subnormal tie to 0
  EXPECT_EQ(floatToF16(3 * 0x1p-25f), 0x0002); // subnormal tie up
  EXPECT_EQ(floatToF16(0x1p-26f), 0x0000);
  EXPECT_EQ(floatToF16(-0x1p-24f), 0x8001);
  EXPECT_EQ(floatToF16(0x1p-14f - 0x1p-25f), 0x0400); // rounds up to normal
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
}

/// Rounds by searching the neighbouring f16 values: independent of the bit
/// manipulation under test.
uint16_t referenceF16(float value, const std::map<float, uint16_t> &finite) {
  if (std::isinf(value))
    return value > 0 ? 0x7c00 : 0xfc00;
  auto above = finite.lower_bound(value);
  if (above != finite.end() && above->first == value)
    return above->second;
  // Past the largest finite value (65504) the next step (65536) is infinity.
  if (above == finite.end())
    return value - 65504.0 >= 16.0 ? 0x7c00 : 0x7bff;
  if (above == finite.begin())
    return -65504.0 - value >= 16.0 ? 0xfc00 : 0xfbff;
  auto below = std::prev(above);
  double up = double(above->first) - value, down = value - double(below->first);
  if (up != down)
    return up < down ? above->second : below->second;
  return (above->second & 1) == 0 ? above->second : below->second;
}

TEST(HalfFloat, F16MatchesANearestSearchAcrossAllExponents) {
  std::map<float, uint16_t> finite;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = f16ToFloat(static_cast<uint16_t>(bits));
    if (std::isfinite(value) && bits != 0x8000)
      finite.emplace(value, static_cast<uint16_t>(bits));
  }
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4093) {
    float value = floatOf(static_cast<uint32_t>(bits));
    if (std::isnan(value) || value == 0.0f)
      continue;
    uint16_t want = referenceF16(value, finite);
    // The search cannot tell -0 from +0: a negative value rounding to zero.
    if (want == 0 && std::signbit(value))
      want = 0x8000;
    ASSERT_EQ(floatToF16(value), want) << std::hexfloat << value;
  }
}

TEST(HalfFloat, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3f80);     // tie, even stays
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f), 0x3f82); // tie, rounds up
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(floatToBf16(floatOf(0x7f7fffff)), 0x7f80); // overflows to inf
  EXPECT_EQ(floatToBf16(-INFINITY), 0xff80);
  uint16_t nan = floatToBf16(floatOf(0x7f800001)); // payload only in low bits
  EXPECT_TRUE(std::isnan(bf16ToFloat(nan)));
  EXPECT_EQ(floatToBf16(floatOf(0x00000001)), 0x0000); // tiny subnormal
}

} // namespace
} // namespace megrt::test
