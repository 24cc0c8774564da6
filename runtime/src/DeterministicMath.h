// log and cos built only from correctly rounded IEEE-754 operations.
#ifndef MEGRT_SRC_DETERMINISTICMATH_H
#define MEGRT_SRC_DETERMINISTICMATH_H

namespace megrt {

// libm's log and cos differ in the last bit between implementations, which
// would make "the same seed gives the same parameters" platform-dependent.
// These use only +, -, *, / and frexp, so they give the same bits on every
// IEEE-754 machine (the library is built with -ffp-contract=off so no FMA
// changes the rounding). They are accurate to a few ulp, plenty for sampling.

/// Natural logarithm of a positive, finite, normal x.
double deterministicLog(double x);

/// cos(2 * pi * turns) for turns in [0, 1).
double deterministicCos2Pi(double turns);

} // namespace megrt

#endif // MEGRT_SRC_DETERMINISTICMATH_H
