// Checks of the tensors a session is given (TensorChecks.h).
#include "TensorChecks.h"

#include "Fail.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace megrt {

/// `what` must have `spec`'s dtype and shape.
void checkTensorMatches(const Tensor &tensor, DType dtype, const Shape &shape,
                        const std::string &what) {
  if (tensor.dtype() != dtype)
    fail(what, " has dtype ", dtypeName(tensor.dtype()), ", expected ",
         dtypeName(dtype));
  if (tensor.shape() != shape)
    fail(what, " has shape ", formatShape(tensor.shape()), ", expected ",
         formatShape(shape));
}

/// Fails naming the first NaN or infinity of a floating-point tensor.
void checkFinite(const Tensor &tensor, const std::string &what) {
  if (!isFloatingPoint(tensor.dtype()))
    return;
  // In place, without a widened copy (a checkpoint's every weight passes
  // here): NaN and infinity are the values whose exponent bits are all
  // ones, in every floating-point dtype.
  auto count = static_cast<size_t>(tensor.numElements());
  size_t i = 0;
  bool nan = false;
  if (tensor.dtype() == DType::F32) {
    const float *values = tensor.dataAs<float>();
    while (i < count && std::isfinite(values[i]))
      ++i;
    nan = i < count && values[i] != values[i];
  } else {
    uint16_t exponent = tensor.dtype() == DType::BF16 ? 0x7f80 : 0x7c00;
    const uint16_t *bits = tensor.dataAs<uint16_t>();
    while (i < count && (bits[i] & exponent) != exponent)
      ++i;
    nan = i < count && (bits[i] & 0x7fff) != exponent;
  }
  if (i < count) {
    std::string index;
    size_t rest = i;
    for (size_t d = tensor.shape().size(); d-- > 0;) {
      auto dim = static_cast<size_t>(tensor.shape()[d]);
      index = concat(rest % dim, index.empty() ? "" : ", ", index);
      rest /= dim;
    }
    fail(what, " holds ", nan ? "NaN" : "an infinity", " at element ", i,
         " (index [", index,
         "]); a run from it would be meaningless (turn the check off with "
         "--no-check-finite / SessionOptions::checkFinite)");
  }
}

/// Fails naming the first negative element (NaN passes: checkFinite's).
void checkNonNegative(const Tensor &tensor, const std::string &what) {
  std::vector<float> values = tensor.toFloats();
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0)
      fail(what, " holds ", values[i], " at element ", i,
           ", but it is never negative (a second moment or a step count)");
}

} // namespace megrt
