//===- TensorChecks.h - checks of tensors handed to a session ------------===//
//
// The checks a session makes of the tensors it is given (entry inputs,
// parameter values, checkpoint contents), each failing with a message that
// names the tensor (`what`) and the problem.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_TENSORCHECKS_H
#define MEGRT_SRC_TENSORCHECKS_H

#include "megrt/Tensor.h"

#include <string>

namespace megrt {

/// `what` must have `dtype` and `shape`.
void checkTensorMatches(const Tensor &tensor, DType dtype, const Shape &shape,
                        const std::string &what);
/// Fails naming the first NaN or infinity of a floating-point tensor.
void checkFinite(const Tensor &tensor, const std::string &what);
/// Fails naming the first negative element (NaN passes: checkFinite's).
void checkNonNegative(const Tensor &tensor, const std::string &what);

} // namespace megrt

#endif // MEGRT_SRC_TENSORCHECKS_H
