// log and cos built only from correctly rounded IEEE-754 operations.
#include "DeterministicMath.h"

#include <cmath>

namespace megrt {
namespace {
constexpr double kLn2 = 0.6931471805599453094;
constexpr double kSqrtHalf = 0.7071067811865475244;
constexpr double kTwoPi = 6.283185307179586477;

/// cos(x) for |x| <= pi/4 by the nested Taylor form
/// 1 - x^2/(1*2) (1 - x^2/(3*4) (1 - ...)); the first omitted term is below
/// 1e-17.
double cosSmall(double x) {
  double x2 = x * x;
  double acc = 1.0;
  for (int n = 18; n >= 2; n -= 2)
    acc = 1.0 - x2 / (n * (n - 1)) * acc;
  return acc;
}

/// sin(x) for |x| <= pi/4, the same way.
double sinSmall(double x) {
  double x2 = x * x;
  double acc = 1.0;
  for (int n = 19; n >= 3; n -= 2)
    acc = 1.0 - x2 / (n * (n - 1)) * acc;
  return x * acc;
}
} // namespace

double deterministicLog(double x) {
  int exponent;
  double mantissa = std::frexp(x, &exponent);
  if (mantissa < kSqrtHalf) {
    mantissa *= 2.0;
    exponent -= 1;
  }
  // log(m) = 2 atanh(s) with |s| <= 0.172; 11 odd terms reach 1e-17.
  double s = (mantissa - 1.0) / (mantissa + 1.0);
  double s2 = s * s;
  double series = 0.0;
  for (int k = 21; k >= 1; k -= 2)
    series = series * s2 + 1.0 / k;
  return exponent * kLn2 + 2.0 * s * series;
}

double deterministicCos2Pi(double turns) {
  // Reduce to the nearest quarter turn q, leaving |x| <= pi/4.
  double quarter = std::floor(4.0 * turns + 0.5);
  double x = (turns - quarter * 0.25) * kTwoPi;
  switch (static_cast<int>(quarter) & 3) {
  case 0:
    return cosSmall(x);
  case 1:
    return -sinSmall(x);
  case 2:
    return -cosSmall(x);
  default:
    return sinSmall(x);
  }
}

} // namespace megrt
