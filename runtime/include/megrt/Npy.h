// Reading and writing single tensors in NumPy's .npy format.
#ifndef MEGRT_NPY_H
#define MEGRT_NPY_H

#include "megrt/Tensor.h"

#include <string>

namespace megrt {

/// Reads format versions 1.0 and 2.0 in C order with descr '<f4', '<f2',
/// '<i4', '<i8' or '<u2'. NumPy has no bfloat16, so '<u2' is read as the raw
/// bits of a bf16 tensor (writeNpy stores bf16 that way). Anything else is an
/// error naming the file and what it holds.
Tensor readNpy(const std::string &path);

/// Writes version 1.0 (2.0 if the header needs it), data 64-byte aligned.
void writeNpy(const std::string &path, const Tensor &tensor);

} // namespace megrt

#endif // MEGRT_NPY_H
