// Shape helpers shared by tensors, the verifier and the file formats.
#ifndef MEGRT_SHAPE_H
#define MEGRT_SHAPE_H

#include "megrt/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megrt {

using Shape = std::vector<int64_t>;

/// "[2,3]"; "[]" for a scalar.
std::string formatShape(const Shape &shape);

/// "f32[2,3]".
std::string formatType(DType dtype, const Shape &shape);

/// Product of the dimensions. Throws megrt::Error naming `what` if a
/// dimension is negative or the product overflows.
int64_t numElements(const Shape &shape, const std::string &what);

/// numElements * elementSize, with the same checks.
uint64_t byteSize(DType dtype, const Shape &shape, const std::string &what);

} // namespace megrt

#endif // MEGRT_SHAPE_H
