//===- VJPUtils.h - helpers for the ops' vector-Jacobian products -*- C++ -*-===//
//
// Builders shared by the buildVJP implementations.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_IR_VJPUTILS_H
#define MEGC_LIB_DIALECT_MEG_IR_VJPUTILS_H

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::meg {

/// A rank-0 constant of `element` type holding `value` (broadcasts against
/// any tensor in the elementwise ops).
Value scalarConstant(OpBuilder &b, Location loc, Type element, double value);

/// A zero tensor of `type`.
Value zerosOf(OpBuilder &b, Location loc, RankedTensorType type);

/// Sums `grad` over the dimensions that broadcasting added or stretched so
/// that it has `target`'s shape (the transpose of NumPy broadcasting).
Value unbroadcast(OpBuilder &b, Location loc, Value grad,
                  RankedTensorType target);

Value reshapeTo(OpBuilder &b, Location loc, Value value,
                ArrayRef<int64_t> shape);

inline RankedTensorType tensorTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_IR_VJPUTILS_H
