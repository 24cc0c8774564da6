//===- Clipping.h - global-norm gradient clipping ---------------*- C++ -*-===//
//
// The pieces of clip_grad's arithmetic that meg-optimizer (on one rank's
// gradients) and meg-fsdp (on the reduced gradients, with the partial sums
// added over ranks in between) both emit.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_TRANSFORMS_CLIPPING_H
#define MEGC_LIB_DIALECT_MEG_TRANSFORMS_CLIPPING_H

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::meg {

/// The sum of the squares of `value`'s elements in f32, as a scalar.
inline Value sumOfSquares(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Type f32 = b.getF32Type();
  if (type.getElementType() != f32)
    value = CastOp::create(b, loc, type.clone(f32), value);
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    dims.push_back(d);
  return ReduceOp::create(b, loc, ReduceKind::sum,
                          MulOp::create(b, loc, value, value), dims,
                          /*keep_dims=*/false);
}

/// The gradients' scale for the global `norm`: min(1, clip / (norm + 1e-6)),
/// as torch.nn.utils.clip_grad_norm_ computes it.
inline Value clipScale(OpBuilder &b, Location loc, Value norm, double clip) {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  auto constant = [&](double value) -> Value {
    return arith::ConstantOp::create(
        b, loc, scalar,
        DenseElementsAttr::get(scalar, b.getFloatAttr(b.getF32Type(), value)));
  };
  Value coefficient = DivOp::create(
      b, loc, constant(clip), AddOp::create(b, loc, norm, constant(1e-6)));
  // min(c, 1) = -max(-c, -1)
  return NegOp::create(
      b, loc,
      MaxOp::create(b, loc, NegOp::create(b, loc, coefficient), constant(-1.0)));
}

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_TRANSFORMS_CLIPPING_H
