//===- OnlineSoftmax.h - a row's maximum and sum-exp in one pass -*- C++
//-*-===//
//
// The combining step of meg-online-softmax's reductions, shared by the pass
// that builds a nest's body from it and by the GPU mapping that combines the
// threads' pairs with it, so that both compute the same function.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_KERNELS_ONLINESOFTMAX_H
#define MEGC_LIB_KERNELS_ONLINESOFTMAX_H

#include "mlir/IR/Builders.h"

#include <utility>

namespace megc {

/// A row's softmax statistics so far: the maximum `max` of its elements and
/// the sum `sum` of exp(x - max) over them. An empty row is (-inf, 0).
struct SoftmaxStatistics {
  mlir::Value max, sum;
};

/// The statistics of two parts of a row together:
///
///   max = maximumf(a.max, b.max)
///   d   = exp(minimumf(a.max, b.max) - max), or 0 where max is -inf
///   sum = b.max > a.max ? a.sum * d + b.sum : a.sum + b.sum * d
///
/// one exponential per step; the sum with the smaller maximum is rescaled.
/// It gives the same bits with a and b swapped. `b.sum` null stands for 1
/// (a single element, b.max): the body of a nest that adds elements one at a
/// time.
SoftmaxStatistics combineSoftmaxStatistics(mlir::OpBuilder &b,
                                           mlir::Location loc,
                                           SoftmaxStatistics a,
                                           SoftmaxStatistics bPart);

} // namespace megc

#endif // MEGC_LIB_KERNELS_ONLINESOFTMAX_H
