// Fills a parameter tensor from its init spec.
#ifndef MEGRT_SRC_PARAMETERINIT_H
#define MEGRT_SRC_PARAMETERINIT_H

#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <cstdint>

namespace megrt {

/// Element i of a normal or uniform parameter is a function of (seed,
/// parameter name, i) only. Keying by name rather than by position keeps the
/// values of a parameter unchanged when a compiler option reorders or adds
/// parameters, so programs compiled with and without a pass compare equal.
/// Values are computed in double, rounded to f32, then (for bf16/f16) to the
/// parameter's dtype.
/// Copies (InitKind::Copy) are filled by copyParameter instead.
void initializeParameter(Tensor &tensor, const ParameterSpec &spec,
                         uint64_t seed);

/// `to` = `from` converted to `to`'s floating-point dtype (same shape),
/// rounding to nearest even.
void copyParameter(Tensor &to, const Tensor &from);

} // namespace megrt

#endif // MEGRT_SRC_PARAMETERINIT_H
