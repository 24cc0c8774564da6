//===- NNOpsVJP.cpp - VJPs of the transformer forward ops --------------===//
//
// buildVJP of embedding, matrix products, norms, RoPE, attention,
// activations, softmax, cross-entropy and modulation, mostly through the
// dedicated backward ops.
//
//===----------------------------------------------------------------------===//

#include "VJPUtils.h"

using namespace mlir;
using namespace mlir::meg;

using Grads = FailureOr<SmallVector<Value>>;

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t d : dims)
    result *= d;
  return result;
}

Grads EmbeddingOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Value table = EmbeddingGradOp::create(b, getLoc(), tensorTypeOf(getTable()),
                                        grads[0], getIds(), getFirstRow());
  SmallVector<Value> result = {table, Value()};
  if (getFirstRow())
    result.push_back(Value());
  return result;
}

Grads LinearOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  RankedTensorType input = tensorTypeOf(getInput());
  RankedTensorType weight = tensorTypeOf(getWeight());
  int64_t rows = product(input.getShape().drop_back());
  int64_t in = weight.getDimSize(1), out = weight.getDimSize(0);
  // dx = dy W; dW = dy^T x over all rows; dbias = sum of dy over rows.
  Value dx = MatmulOp::create(b, loc, dy, getWeight(), false, false);
  Value dy2 = reshapeTo(b, loc, dy, {rows, out});
  Value x2 = reshapeTo(b, loc, getInput(), {rows, in});
  Value dw = MatmulOp::create(b, loc, dy2, x2, /*transpose_lhs=*/true, false);
  SmallVector<Value> result = {dx, dw};
  if (getBias())
    result.push_back(ReduceOp::create(b, loc, ReduceKind::sum, dy2,
                                      ArrayRef<int64_t>{0}, false));
  return result;
}

Grads MatmulOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  RankedTensorType lhs = tensorTypeOf(getLhs()), rhs = tensorTypeOf(getRhs());
  bool sharedRhs = rhs.getRank() == 2 && lhs.getRank() > 2;
  if (sharedRhs && ta) {
    emitOpError() << "has no vector-Jacobian product yet for a transposed "
                     "batched lhs with a shared rank-2 rhs";
    return failure();
  }
  // lhs: d op(A) = dy op(B)^T, stored back transposed when A is.
  Value da = ta ? MatmulOp::create(b, loc, getRhs(), dy, tb, true).getResult()
                : MatmulOp::create(b, loc, dy, getRhs(), false, !tb)
                      .getResult();
  // rhs: d op(B) = op(A)^T dy; a shared rhs sums over the batch by folding
  // it into the rows.
  Value a = getLhs();
  if (sharedRhs) {
    int64_t rows = product(lhs.getShape().drop_back());
    a = reshapeTo(b, loc, a, {rows, lhs.getShape().back()});
    dy = reshapeTo(b, loc, dy, {rows, tensorTypeOf(dy).getShape().back()});
  }
  Value db = tb ? MatmulOp::create(b, loc, dy, a, true, ta).getResult()
                : MatmulOp::create(b, loc, a, dy, !ta, false).getResult();
  return SmallVector<Value>{da, db};
}

Grads RmsNormOp::buildVJP(OpBuilder &b, ValueRange grads) {
  auto grad = RmsNormGradOp::create(b, getLoc(), grads[0], getInput(),
                                    getWeight(), getEpsAttr());
  return SmallVector<Value>{grad.getInputGrad(), grad.getWeightGrad()};
}

Grads LayerNormOp::buildVJP(OpBuilder &b, ValueRange grads) {
  auto grad = LayerNormGradOp::create(b, getLoc(), grads[0], getInput(),
                                      getWeight(), getEpsAttr());
  return SmallVector<Value>(grad.getResults());
}

Grads RopeOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Value dx = RopeGradOp::create(b, getLoc(), grads[0], getCos(), getSin(),
                                getLayoutAttr(), getInterleavedAttr());
  return SmallVector<Value>{dx, Value(), Value()};
}

Grads AttentionOp::buildVJP(OpBuilder &b, ValueRange grads) {
  // Without the forward's statistics: meg-keep-attention-stats hands them
  // over once the backward is complete.
  auto grad = AttentionGradOp::create(
      b, getLoc(), grads[0], getQuery(), getKey(), getValue(), getResult(),
      /*stats=*/Value(), getPositions(), getCausalAttr(), getScaleAttr());
  return SmallVector<Value>{grad.getQueryGrad(), grad.getKeyGrad(),
                            grad.getValueGrad(), Value()};
}

Grads GeluOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{GeluGradOp::create(b, getLoc(), grads[0],
                                               getInput(),
                                               getApproximateAttr())};
}

Grads SiluOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{
      SiluGradOp::create(b, getLoc(), grads[0], getInput())};
}

Grads SwigluOp::buildVJP(OpBuilder &b, ValueRange grads) {
  auto grad =
      SwigluGradOp::create(b, getLoc(), grads[0], getGate(), getUp());
  return SmallVector<Value>{grad.getGateGrad(), grad.getUpGrad()};
}

Grads SoftmaxOp::buildVJP(OpBuilder &b, ValueRange grads) {
  return SmallVector<Value>{SoftmaxGradOp::create(
      b, getLoc(), grads[0], getResult(), getAxisAttr())};
}

Grads CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Value dLogits = CrossEntropyGradOp::create(b, getLoc(), grads[0],
                                             getLogits(), getLabels(),
                                             getReductionAttr(),
                                             getIgnoreIndexAttr());
  return SmallVector<Value>{dLogits, Value()};
}

// The maximum is a constant to the loss (it cancels), and the mask has no
// gradient.
Grads VocabShardStatsOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  auto type = cast<RankedTensorType>(getMax().getType());
  auto zeros = [&]() -> Value {
    return arith::ConstantOp::create(
        b, loc, type, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0f)));
  };
  Value sumExp = grads[0] ? grads[0] : zeros();
  Value target = grads[1] ? grads[1] : zeros();
  Value dLogits = VocabShardStatsGradOp::create(
      b, loc, getLogits().getType(), sumExp, target, getLogits(), getMax(),
      getLabels(), getFirstClass());
  return SmallVector<Value>{dLogits, Value(), Value(), Value()};
}

Grads ModulateOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Location loc = getLoc();
  Value dy = grads[0];
  RankedTensorType input = tensorTypeOf(getInput());
  // y = x (1 + scale) + shift, scale/shift [B, H] broadcast over S.
  Value scale = reshapeTo(
      b, loc, getScale(), {input.getDimSize(0), 1, input.getDimSize(2)});
  Value dx = AddOp::create(b, loc, dy, MulOp::create(b, loc, dy, scale));
  SmallVector<int64_t> seq = {1};
  Value dShift = ReduceOp::create(b, loc, ReduceKind::sum, dy, seq, false);
  Value dScale =
      ReduceOp::create(b, loc, ReduceKind::sum,
                       MulOp::create(b, loc, dy, getInput()), seq, false);
  return SmallVector<Value>{dx, dShift, dScale};
}
