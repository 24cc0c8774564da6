//===- VJPUtils.cpp - helpers for the ops' vector-Jacobian products ----===//
//
// Constants, zeros, un-broadcasting and reshapes for buildVJP.
//
//===----------------------------------------------------------------------===//

#include "VJPUtils.h"

namespace mlir::meg {

Value scalarConstant(OpBuilder &b, Location loc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  return arith::ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
}

Value zerosOf(OpBuilder &b, Location loc, RankedTensorType type) {
  return arith::ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
}

Value reshapeTo(OpBuilder &b, Location loc, Value value,
                ArrayRef<int64_t> shape) {
  RankedTensorType type = tensorTypeOf(value);
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(b, loc, type.clone(shape), value);
}

Value unbroadcast(OpBuilder &b, Location loc, Value grad,
                  RankedTensorType target) {
  RankedTensorType type = tensorTypeOf(grad);
  if (type.getShape() == target.getShape())
    return grad;
  int64_t offset = type.getRank() - target.getRank();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < offset ||
        (target.getDimSize(d - offset) == 1 && type.getDimSize(d) != 1))
      dims.push_back(d);
  Value summed = grad;
  if (!dims.empty())
    summed = ReduceOp::create(b, loc, ReduceKind::sum, grad, dims,
                              /*keep_dims=*/false);
  return reshapeTo(b, loc, summed, target.getShape());
}

} // namespace mlir::meg
