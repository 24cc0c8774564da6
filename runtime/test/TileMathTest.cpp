// The row kernels of the CPU attention against double-precision references.
#include "cpu/TileMath.h"

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

namespace megrt {
namespace {

// Lengths around every vector width (4, 8, 16 lanes) and their tails.
constexpr int64_t kLengths[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 255};

TEST(TileMath, ExpShiftedSumIsCloseToExp) {
  std::mt19937 generator(5);
  std::uniform_real_distribution<float> uniform(-90.0f, 0.0f);
  for (int64_t count : kLengths) {
    std::vector<float> values(count);
    for (float &v : values)
      v = uniform(generator);
    std::vector<float> input = values;
    float shift = -1.5f;
    float sum = expShiftedSum(values.data(), count, shift);
    double expected = 0;
    for (int64_t i = 0; i < count; ++i) {
      double x = static_cast<double>(input[i]) - shift;
      double reference = std::exp(x);
      // Below the smallest normal the result is 0; above, within 2 ulp.
      if (static_cast<float>(x) < -87.3365447504f) {
        EXPECT_EQ(values[i], 0.0f) << "x " << x;
        continue;
      }
      expected += reference;
      EXPECT_NEAR(values[i], reference,
                  2 * std::numeric_limits<float>::epsilon() * reference)
          << "x " << x;
    }
    EXPECT_NEAR(sum, expected, 1e-6 * expected + 1e-30) << count;
  }
}

TEST(TileMath, ExpShiftedSumHandlesTheRangeEnds) {
  std::vector<float> values = {
      0.0f,   -0.0f,  1.0f,    -1.0f,
      -87.0f, -88.0f, -200.0f, -std::numeric_limits<float>::infinity()};
  std::vector<float> input = values;
  expShiftedSum(values.data(), static_cast<int64_t>(values.size()), 0.0f);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 1.0f);
  EXPECT_NEAR(values[2], std::exp(1.0), 2e-7 * std::exp(1.0));
  EXPECT_NEAR(values[3], std::exp(-1.0), 2e-7 * std::exp(-1.0));
  EXPECT_NEAR(values[4], std::exp(-87.0), 2e-7 * std::exp(-87.0));
  // exp(-88) is subnormal in f32: flushed to 0, as are the masked scores.
  EXPECT_EQ(values[5], 0.0f);
  EXPECT_EQ(values[6], 0.0f);
  EXPECT_EQ(values[7], 0.0f);
}

TEST(TileMath, SoftmaxGradRowMatchesItsFormula) {
  std::mt19937 generator(9);
  std::normal_distribution<float> normal;
  for (int64_t count : kLengths) {
    std::vector<float> p(count), dp(count);
    for (int64_t i = 0; i < count; ++i) {
      p[i] = normal(generator);
      dp[i] = normal(generator);
    }
    std::vector<float> expected(count);
    for (int64_t i = 0; i < count; ++i)
      expected[i] = p[i] * (dp[i] - 0.25f) * 0.125f;
    softmaxGradRow(p.data(), dp.data(), count, 0.25f, 0.125f);
    for (int64_t i = 0; i < count; ++i)
      EXPECT_EQ(p[i], expected[i]) << i << " of " << count;
  }
}

TEST(TileMath, RowReductionsMatchDoubleReferences) {
  std::mt19937 generator(13);
  std::normal_distribution<float> normal;
  for (int64_t count : kLengths) {
    std::vector<float> a(count), b(count);
    double dot = 0, max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < count; ++i) {
      a[i] = normal(generator);
      b[i] = normal(generator);
      dot += static_cast<double>(a[i]) * b[i];
      max = std::max(max, static_cast<double>(a[i]));
    }
    EXPECT_NEAR(dotRow(a.data(), b.data(), count), dot, 1e-5 * (1 + count));
    EXPECT_EQ(maxOf(a.data(), count), static_cast<float>(max));
  }
}

} // namespace
} // namespace megrt
