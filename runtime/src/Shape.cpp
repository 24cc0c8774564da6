// Shape helpers shared by tensors, the verifier and the file formats.
#include "megrt/Shape.h"

#include "Fail.h"

#include <limits>

namespace megrt {

std::string formatShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ",";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string formatType(DType dtype, const Shape &shape) {
  return dtypeName(dtype) + formatShape(shape);
}

int64_t numElements(const Shape &shape, const std::string &what) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      fail(what, ": expected non-negative dimensions, found shape ",
           formatShape(shape));
    if (__builtin_mul_overflow(count, dim, &count))
      fail(what, ": shape ", formatShape(shape), " has too many elements");
  }
  return count;
}

uint64_t byteSize(DType dtype, const Shape &shape, const std::string &what) {
  uint64_t bytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numElements(shape, what)),
                             elementSize(dtype), &bytes) ||
      bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(what, ": ", formatType(dtype, shape), " is too large");
  return bytes;
}

} // namespace megrt
