//===- LinalgBuilder.cpp - helpers for meg-to-linalg patterns ----------===//
//
// linalg.generic construction shared by the meg lowering patterns.
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"

#include <limits>

namespace mlir::meg {

Type computeType(Type element) {
  if (isa<FloatType>(element))
    return Float32Type::get(element.getContext());
  return element;
}

Value toCompute(OpBuilder &b, Location loc, Value scalar) {
  Type type = scalar.getType();
  Type compute = computeType(type);
  if (type == compute)
    return scalar;
  return arith::ExtFOp::create(b, loc, compute, scalar);
}

Value convertScalar(OpBuilder &b, Location loc, Value scalar, Type target) {
  Type source = scalar.getType();
  if (source == target)
    return scalar;
  bool srcFloat = isa<FloatType>(source), dstFloat = isa<FloatType>(target);
  if (srcFloat && dstFloat) {
    if (source.getIntOrFloatBitWidth() < target.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, target, scalar);
    return arith::TruncFOp::create(b, loc, target, scalar);
  }
  if (srcFloat)
    return arith::FPToSIOp::create(b, loc, target, scalar);
  if (dstFloat)
    return arith::SIToFPOp::create(b, loc, target, scalar);
  if (source.getIntOrFloatBitWidth() < target.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(b, loc, target, scalar);
  return arith::TruncIOp::create(b, loc, target, scalar);
}

Value floatConstant(OpBuilder &b, Location loc, Type type, double value) {
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value));
}

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value) {
  Value scalar = floatConstant(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, emptyTensor(b, loc, type))
      .getResult(0);
}

AffineMap broadcastMap(MLIRContext *context, ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape) {
  int64_t offset = resultShape.size() - operandShape.size();
  SmallVector<AffineExpr> exprs;
  for (auto [index, size] : llvm::enumerate(operandShape)) {
    int64_t dim = offset + index;
    if (size == 1 && resultShape[dim] != 1)
      exprs.push_back(getAffineConstantExpr(0, context));
    else
      exprs.push_back(getAffineDimExpr(dim, context));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, context);
}

SmallVector<utils::IteratorType> parallelIterators(int64_t rank) {
  return SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel);
}

Value buildMapped(OpBuilder &b, Location loc, RankedTensorType resultType,
                  ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                  ScalarFn fn) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(b.getMultiDimIdentityMap(resultType.getRank()));
  Type element = resultType.getElementType();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs,
      ValueRange{emptyTensor(b, loc, resultType)}, maps,
      parallelIterators(resultType.getRank()),
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        SmallVector<Value> scalars;
        for (Value arg : args.drop_back())
          scalars.push_back(toCompute(nested, nestedLoc, arg));
        Value result = fn(nested, nestedLoc, scalars);
        linalg::YieldOp::create(
            nested, nestedLoc,
            convertScalar(nested, nestedLoc, result, element));
      });
  return generic.getResult(0);
}

Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ScalarFn fn) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(
        b.getContext(), cast<RankedTensorType>(input.getType()).getShape(),
        resultType.getShape()));
  return buildMapped(b, loc, resultType, inputs, maps, fn);
}

AffineMap reducedMap(MLIRContext *context, int64_t rank,
                     ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(rank, 0, exprs, context);
}

Value buildReduction(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> dims, Combine combine, ValueRange extra,
                     ArrayRef<AffineMap> extraMaps, ScalarFn fn) {
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t rank = inputType.getRank();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(inputType.getDimSize(d));
  auto resultType = RankedTensorType::get(shape, b.getF32Type());
  double identity = combine == Combine::Sum
                        ? 0.0
                        : -std::numeric_limits<double>::infinity();
  Value init = filledTensor(b, loc, resultType, identity);

  SmallVector<Value> inputs = {input};
  inputs.append(extra.begin(), extra.end());
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank)};
  maps.append(extraMaps.begin(), extraMaps.end());
  maps.push_back(reducedMap(b.getContext(), rank, dims));
  SmallVector<utils::IteratorType> iterators = parallelIterators(rank);
  for (int64_t d : dims)
    iterators[d] = utils::IteratorType::reduction;

  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        SmallVector<Value> scalars;
        for (Value arg : args.drop_back())
          scalars.push_back(toCompute(nested, nestedLoc, arg));
        Value value = fn ? fn(nested, nestedLoc, scalars) : scalars.front();
        Value acc = args.back();
        Value combined =
            combine == Combine::Sum
                ? arith::AddFOp::create(nested, nestedLoc, acc, value)
                      .getResult()
                : arith::MaximumFOp::create(nested, nestedLoc, acc, value)
                      .getResult();
        linalg::YieldOp::create(nested, nestedLoc, combined);
      });
  return generic.getResult(0);
}

Value reshapeTensor(OpBuilder &b, Location loc, Value input,
                    ArrayRef<int64_t> shape) {
  auto inputType = cast<RankedTensorType>(input.getType());
  auto resultType = RankedTensorType::get(shape, inputType.getElementType());
  auto shapeType = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                         b.getIndexType());
  SmallVector<APInt> dims;
  for (int64_t size : shape)
    dims.push_back(APInt(64, size));
  Value shapeValue = arith::ConstantOp::create(
      b, loc, shapeType, DenseElementsAttr::get(shapeType, dims));
  return tensor::ReshapeOp::create(b, loc, resultType, input, shapeValue);
}

AffineMap mapOf(MLIRContext *context, int64_t dims,
                ArrayRef<AffineExpr> exprs) {
  return AffineMap::get(dims, 0, exprs, context);
}

Value contract(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Value lhs,
               Value rhs, ArrayRef<AffineMap> maps,
               ArrayRef<utils::IteratorType> iterators) {
  auto type = RankedTensorType::get(shape, b.getF32Type());
  Value init = filledTensor(b, loc, type, 0.0);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{lhs, rhs}, ValueRange{init}, maps,
      iterators, [](OpBuilder &nested, Location l, ValueRange args) {
        Value product =
            arith::MulFOp::create(nested, l, toCompute(nested, l, args[0]),
                                  toCompute(nested, l, args[1]));
        Value sum = arith::AddFOp::create(nested, l, args[2], product);
        linalg::YieldOp::create(nested, l, sum);
      });
  return generic.getResult(0);
}

Value finish(OpBuilder &b, Location loc, Value acc, RankedTensorType type,
             Value bias) {
  SmallVector<Value> inputs = {acc};
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(type.getRank())};
  if (bias) {
    inputs.push_back(bias);
    maps.push_back(mapOf(b.getContext(), type.getRank(),
                         {b.getAffineDimExpr(type.getRank() - 1)}));
  }
  return buildMapped(b, loc, type, inputs, maps,
                     [](OpBuilder &nested, Location l, ValueRange a) -> Value {
                       if (a.size() == 1)
                         return a[0];
                       return arith::AddFOp::create(nested, l, a[0], a[1]);
                     });
}

Value clampedIndex(OpBuilder &b, Location loc, Value id, int64_t size) {
  Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), id);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value last = arith::ConstantIndexOp::create(b, loc, size - 1);
  return arith::MinSIOp::create(b, loc,
                                arith::MaxSIOp::create(b, loc, index, zero),
                                last);
}

Value localIndex(OpBuilder &b, Location loc, Value id, Value first) {
  Value start = arith::IndexCastOp::create(
      b, loc, b.getIndexType(),
      tensor::ExtractOp::create(b, loc, first, ValueRange{}));
  return arith::SubIOp::create(
      b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), id), start);
}

BlockIndex blockIndex(OpBuilder &b, Location loc, Value id, Value first,
                      int64_t size) {
  Value local = localIndex(b, loc, id, first);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value inBlock = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, local, zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, local,
                            arith::ConstantIndexOp::create(b, loc, size)));
  Value index = arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, local, zero),
      arith::ConstantIndexOp::create(b, loc, size - 1));
  return {index, inBlock};
}

Value countsTowardLoss(OpBuilder &b, Location loc, Value label,
                       int64_t ignoreIndex) {
  Value ignored = arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(label.getType(), ignoreIndex));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, label,
                               ignored);
}

SoftmaxStats buildSoftmaxStats(OpBuilder &b, Location loc, Value input,
                               int64_t axis) {
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  AffineMap rowMap = reducedMap(b.getContext(), rank, {axis});
  Value max = buildReduction(b, loc, input, {axis}, Combine::Max);
  Value sumExp = buildReduction(
      b, loc, input, {axis}, Combine::Sum, {max}, {rowMap},
      [](OpBuilder &nested, Location l, ValueRange a) -> Value {
        return math::ExpOp::create(nested, l,
                                   arith::SubFOp::create(nested, l, a[0], a[1]));
      });
  return {max, sumExp, rowMap};
}

Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Value one = floatConstant(b, loc, x.getType(), 1.0);
  Value negExp = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one,
                               arith::AddFOp::create(b, loc, one, negExp));
}

} // namespace mlir::meg
