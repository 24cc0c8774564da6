//===- TensorOpsVJP.cpp - VJPs of elementwise and data movement ops ----===//
//
// buildVJP of the arithmetic, unary math, cast and shape ops.
//
//===----------------------------------------------------------------------===//

#include "VJPUtils.h"

using namespace mlir;
using namespace mlir::meg;

using Grads = FailureOr<SmallVector<Value>>;

//===----------------------------------------------------------------------===//
// Binary arithmetic: gradients are un-broadcast to each operand's shape.
//===----------------------------------------------------------------------===//

Grads AddOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  return SmallVector<Value>{
      unbroadcast(b, loc, grads[0], tensorTypeOf(getLhs())),
      unbroadcast(b, loc, grads[0], tensorTypeOf(getRhs()))};
}

Grads SubOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  return SmallVector<Value>{
      unbroadcast(b, loc, grads[0], tensorTypeOf(getLhs())),
      unbroadcast(b, loc, NegOp::create(b, loc, grads[0]),
                  tensorTypeOf(getRhs()))};
}

Grads MulOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  return SmallVector<Value>{
      unbroadcast(b, loc, MulOp::create(b, loc, grads[0], getRhs()),
                  tensorTypeOf(getLhs())),
      unbroadcast(b, loc, MulOp::create(b, loc, grads[0], getLhs()),
                  tensorTypeOf(getRhs()))};
}

Grads DivOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  // d(a/b)/db = -a / b^2
  Value dLhs = DivOp::create(b, loc, grads[0], getRhs());
  Value dRhs = NegOp::create(
      b, loc,
      DivOp::create(b, loc, MulOp::create(b, loc, grads[0], getLhs()),
                    MulOp::create(b, loc, getRhs(), getRhs())));
  return SmallVector<Value>{unbroadcast(b, loc, dLhs, tensorTypeOf(getLhs())),
                            unbroadcast(b, loc, dRhs, tensorTypeOf(getRhs()))};
}

//===----------------------------------------------------------------------===//
// Unary math: dy times the derivative, written with the result where cheap.
//===----------------------------------------------------------------------===//

static Value elementConstant(OpBuilder &b, Operation *op, double value) {
  return scalarConstant(b, op->getLoc(),
                        tensorTypeOf(op->getResult(0)).getElementType(),
                        value);
}

Grads NegOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{NegOp::create(b, getLoc(), grads[0])};
}

Grads ExpOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{MulOp::create(b, getLoc(), grads[0], getResult())};
}

Grads LogOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{DivOp::create(b, getLoc(), grads[0], getInput())};
}

Grads CosOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  return SmallVector<Value>{NegOp::create(
      b, loc, MulOp::create(b, loc, grads[0], SinOp::create(b, loc, getInput())))};
}

Grads SinOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  return SmallVector<Value>{
      MulOp::create(b, loc, grads[0], CosOp::create(b, loc, getInput()))};
}

Grads SqrtOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  // dy / (2 sqrt(x))
  return SmallVector<Value>{DivOp::create(
      b, loc, grads[0], AddOp::create(b, loc, getResult(), getResult()))};
}

Grads RsqrtOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  // -0.5 dy y^3
  Value y = getResult();
  Value cube = MulOp::create(b, loc, MulOp::create(b, loc, y, y), y);
  return SmallVector<Value>{
      MulOp::create(b, loc, MulOp::create(b, loc, grads[0], cube),
                    elementConstant(b, *this, -0.5))};
}

Grads TanhOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  Value y = getResult();
  return SmallVector<Value>{SubOp::create(
      b, loc, grads[0], MulOp::create(b, loc, grads[0], MulOp::create(b, loc, y, y)))};
}

Grads SigmoidOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  Value y = getResult();
  return SmallVector<Value>{MulOp::create(
      b, loc, grads[0], SubOp::create(b, loc, y, MulOp::create(b, loc, y, y)))};
}

//===----------------------------------------------------------------------===//
// Casts and data movement.
//===----------------------------------------------------------------------===//

Grads CastOp::buildVJP(OpBuilder &b, ValueRange grads) {
  RankedTensorType input = tensorTypeOf(getInput());
  if (!isa<FloatType>(input.getElementType()))
    return SmallVector<Value>{Value()};
  return SmallVector<Value>{CastOp::create(b, getLoc(), input, grads[0])};
}

Grads ReshapeOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{
      reshapeTo(b, getLoc(), grads[0], tensorTypeOf(getInput()).getShape())};
}

Grads StopGradientOp::buildVJP(OpBuilder &, ValueRange) {
  return SmallVector<Value>{Value()};
}

Grads TransposeOp::buildVJP(OpBuilder &b, ValueRange grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [index, dim] : llvm::enumerate(perm))
    inverse[dim] = index;
  return SmallVector<Value>{
      TransposeOp::create(b, getLoc(), grads[0], inverse)};
}

Grads SliceOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{SliceGradOp::create(
      b, getLoc(), tensorTypeOf(getInput()), grads[0], getOffsets(),
      getStrides())};
}

Grads ConcatOp::buildVJP(OpBuilder &b, ValueRange grads) {
  SmallVector<int64_t> sizes;
  for (Value input : getInputs())
    sizes.push_back(tensorTypeOf(input).getDimSize(getAxis()));
  if (sizes.size() == 1)
    return SmallVector<Value>{grads[0]};
  auto split = SplitOp::create(b, getLoc(), grads[0], getAxis(), sizes);
  return SmallVector<Value>(split.getResults());
}

Grads SplitOp::buildVJP(OpBuilder &b, ValueRange grads) {
  SmallVector<Value> pieces;
  for (auto [grad, result] : llvm::zip(grads, getResults()))
    pieces.push_back(grad ? grad
                          : zerosOf(b, getLoc(), tensorTypeOf(result)));
  return SmallVector<Value>{ConcatOp::create(b, getLoc(), pieces, getAxis())};
}

Grads BroadcastOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{
      unbroadcast(b, getLoc(), grads[0], tensorTypeOf(getInput()))};
}

Grads ReduceOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  if (getKind() == ReduceKind::max) {
    emitOpError() << "has no vector-Jacobian product for reduce max";
    return failure();
  }
  RankedTensorType input = tensorTypeOf(getInput());
  // Put the reduced dims back as size 1, then stretch them.
  SmallVector<int64_t> kept(input.getShape());
  int64_t count = 1;
  for (int64_t d : getDims()) {
    count *= kept[d];
    kept[d] = 1;
  }
  Value grad = reshapeTo(b, loc, grads[0], kept);
  if (getKind() == ReduceKind::mean)
    grad = MulOp::create(
        b, loc, grad,
        scalarConstant(b, loc, input.getElementType(), 1.0 / count));
  return SmallVector<Value>{BroadcastOp::create(b, loc, input, grad)};
}
