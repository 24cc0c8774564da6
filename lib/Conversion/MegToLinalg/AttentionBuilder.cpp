//===- AttentionBuilder.cpp - attention probabilities as generics ------===//
//
// The forward half shared by attention and its gradient: scores, scale,
// causal mask, softmax over the keys. On the CPU path the probabilities are
// materialised per (batch, head).
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"

#include <limits>

namespace mlir::meg {

Value buildAttentionProbs(OpBuilder &builder, Location loc, Value query,
                          Value key, Value positions, bool causal,
                          double scale) {
  MLIRContext *context = builder.getContext();
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  int64_t batch = q.getDimSize(0), seqQ = q.getDimSize(1),
          heads = q.getDimSize(2), seqKv = k.getDimSize(1),
          group = heads / k.getDimSize(2);
  auto d = [&](int64_t i) { return getAffineDimExpr(i, context); };

  // scores[b, h, s, t] = sum_d q[b, s, h, d] k[b, t, h / group, d]
  SmallVector<utils::IteratorType> iterators = parallelIterators(5);
  iterators.back() = utils::IteratorType::reduction;
  Value scores =
      contract(builder, loc, {batch, heads, seqQ, seqKv}, query, key,
               {mapOf(context, 5, {d(0), d(2), d(1), d(4)}),
                mapOf(context, 5, {d(0), d(3), d(1).floorDiv(group), d(4)}),
                mapOf(context, 5, {d(0), d(1), d(2), d(3)})},
               iterators);

  // Scale and mask: a key after the query position (its entry of
  // `positions`, or aligned to the end when the key sequence is longer)
  // gets -inf.
  int64_t shift = seqKv - seqQ;
  auto scoresType = cast<RankedTensorType>(scores.getType());
  AffineMap identity = builder.getMultiDimIdentityMap(4);
  SmallVector<Value> inputs = {scores};
  SmallVector<AffineMap> maps = {identity};
  if (positions) {
    inputs.push_back(positions);
    maps.push_back(mapOf(context, 4, {d(2)}));
  }
  Value masked = buildMapped(
      builder, loc, scoresType, inputs, maps,
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value scaled = arith::MulFOp::create(
            b, l, a[0], floatConstant(b, l, a[0].getType(), scale));
        if (!causal)
          return scaled;
        Value t = linalg::IndexOp::create(b, l, 3);
        Value limit =
            positions ? arith::IndexCastOp::create(b, l, b.getIndexType(), a[1])
                            .getResult()
                      : arith::AddIOp::create(
                            b, l, linalg::IndexOp::create(b, l, 2),
                            arith::ConstantIndexOp::create(b, l, shift))
                            .getResult();
        Value allowed =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::sle, t, limit);
        Value minusInf = floatConstant(
            b, l, a[0].getType(), -std::numeric_limits<double>::infinity());
        return arith::SelectOp::create(b, l, allowed, scaled, minusInf);
      });
  SoftmaxStats stats = buildSoftmaxStats(builder, loc, masked, 3);
  return buildMapped(
      builder, loc, scoresType, {masked, stats.max, stats.sumExp},
      {identity, stats.rowMap, stats.rowMap},
      [](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value e =
            math::ExpOp::create(b, l, arith::SubFOp::create(b, l, a[0], a[1]));
        return arith::DivFOp::create(b, l, e, a[2]);
      });
}

} // namespace mlir::meg
