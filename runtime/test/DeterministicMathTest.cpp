// The libm-free log and cos agree with libm to within a few ulp.
#include "DeterministicMath.h"

#include <cmath>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

TEST(DeterministicMath, LogMatchesLibm) {
  for (double x : {1.0, 0.5, 2.0, 1e-300, 0x1p-53, 0.7071067811865476,
                   1.4142135623730951, 0.999999999, 1.000000001, 3.0, 1e10})
    EXPECT_NEAR(deterministicLog(x), std::log(x),
                4e-16 * std::max(1.0, std::abs(std::log(x))))
        << x;
  for (int i = 1; i <= 100000; ++i) {
    double x = i / 100000.0;
    ASSERT_NEAR(deterministicLog(x), std::log(x),
                4e-16 * std::max(1.0, std::abs(std::log(x))))
        << x;
  }
  EXPECT_EQ(deterministicLog(1.0), 0.0);
}

TEST(DeterministicMath, Cos2PiMatchesLibm) {
  for (int i = 0; i < 100000; ++i) {
    double turns = i / 100000.0;
    ASSERT_NEAR(deterministicCos2Pi(turns), std::cos(2 * M_PI * turns), 1e-15)
        << turns;
  }
  EXPECT_EQ(deterministicCos2Pi(0.0), 1.0);
  EXPECT_EQ(deterministicCos2Pi(0.5), -1.0);
  EXPECT_NEAR(deterministicCos2Pi(0.25), 0.0, 1e-16);
}

} // namespace
} // namespace megrt::test
