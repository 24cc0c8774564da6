//===- OnlineSoftmax.cpp - a row's maximum and sum-exp in one pass -----===//
//
// meg-online-softmax: the two reductions of a softmax's (or a
// cross-entropy's) statistics over one input, its maximum and then the sum
// of exp(x - maximum), become one nest that keeps both and rescales the sum
// whenever the maximum grows, so that the input is read once instead of
// twice.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "OnlineSoftmax.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace megc {
#define GEN_PASS_DEF_MEGONLINESOFTMAX
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {

SoftmaxStatistics combineSoftmaxStatistics(OpBuilder &b, Location loc,
                                           SoftmaxStatistics a,
                                           SoftmaxStatistics bPart) {
  Type type = a.max.getType();
  Value max = arith::MaximumFOp::create(b, loc, a.max, bPart.max);
  Value min = arith::MinimumFOp::create(b, loc, a.max, bPart.max);
  Value negInf = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(type, -std::numeric_limits<double>::infinity()));
  Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(type, 0.0));
  // exp(-inf - -inf) would be NaN: a part without elements weighs nothing.
  Value empty =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, max, negInf);
  Value scale = math::ExpOp::create(
      b, loc, arith::SubFOp::create(b, loc, min, max).getResult());
  scale = arith::SelectOp::create(b, loc, empty, zero, scale);
  Value bScaled =
      bPart.sum ? arith::MulFOp::create(b, loc, bPart.sum, scale).getResult()
                : scale;
  Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(type, 1.0));
  Value aScaled = arith::MulFOp::create(b, loc, a.sum, scale);
  Value grows = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                      bPart.max, a.max);
  Value whenGrows =
      arith::AddFOp::create(b, loc, aScaled, bPart.sum ? bPart.sum : one);
  Value otherwise = arith::AddFOp::create(b, loc, a.sum, bScaled);
  Value sum = arith::SelectOp::create(b, loc, grows, whenGrows, otherwise);
  return {max, sum};
}

namespace {

/// `value` is `arg`, or `arg` extended to a wider float (bf16 logits read
/// as f32); the extension, if any.
bool readsElement(Value value, BlockArgument arg, arith::ExtFOp &extension) {
  if (value == arg) {
    extension = nullptr;
    return true;
  }
  auto ext = value.getDefiningOp<arith::ExtFOp>();
  if (!ext || ext.getIn() != arg)
    return false;
  extension = ext;
  return true;
}

/// The operand of a two-operand combiner that is not `output`.
Value otherOperand(Operation *op, Value output) {
  if (op->getOperand(0) == output)
    return op->getOperand(1);
  if (op->getOperand(1) == output)
    return op->getOperand(0);
  return nullptr;
}

/// The body's ops other than its terminator.
SmallVector<Operation *> bodyOps(linalg::GenericOp nest) {
  SmallVector<Operation *> ops;
  for (Operation &op : nest.getBody()->without_terminator())
    ops.push_back(&op);
  return ops;
}

/// A maximum reduction of one input into one f32 output:
/// `maximumf(out, [extf] in)`.
struct MaxNest {
  linalg::GenericOp nest;
  arith::ExtFOp extension;
};

std::optional<MaxNest> matchMax(linalg::GenericOp nest) {
  if (nest.getNumDpsInputs() != 1 || nest.getNumDpsInits() != 1 ||
      nest.getNumReductionLoops() == 0 || !nest.hasPureBufferSemantics())
    return std::nullopt;
  Block *body = nest.getBody();
  BlockArgument in = body->getArgument(0), out = body->getArgument(1);
  if (!out.getType().isF32())
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto max = yield.getOperand(0).getDefiningOp<arith::MaximumFOp>();
  if (!max)
    return std::nullopt;
  Value element = otherOperand(max, out);
  MaxNest match{nest, nullptr};
  if (!element || !readsElement(element, in, match.extension))
    return std::nullopt;
  size_t expected = match.extension ? 2 : 1;
  if (bodyOps(nest).size() != expected)
    return std::nullopt;
  return match;
}

/// The sum of exp(x - max) over the same input and iteration space as
/// `max`, into an output indexed as its: `addf(out, exp([extf] in - m))`.
bool matchSumExp(linalg::GenericOp nest, MaxNest max) {
  if (nest.getNumDpsInputs() != 2 || nest.getNumDpsInits() != 1 ||
      !nest.hasPureBufferSemantics() ||
      nest.getIteratorTypesArray() != max.nest.getIteratorTypesArray() ||
      nest.getStaticLoopRanges() != max.nest.getStaticLoopRanges())
    return false;
  OpOperand *input = max.nest.getDpsInputOperand(0);
  OpOperand *maximum = max.nest.getDpsInitOperand(0);
  // Which of the two inputs is the data, which the maximum.
  OpOperand *x = nullptr, *m = nullptr;
  for (OpOperand *operand : nest.getDpsInputOperands()) {
    if (operand->get() == input->get() &&
        nest.getMatchingIndexingMap(operand) ==
            max.nest.getMatchingIndexingMap(input))
      x = operand;
    else if (operand->get() == maximum->get() &&
             nest.getMatchingIndexingMap(operand) ==
                 max.nest.getMatchingIndexingMap(maximum))
      m = operand;
  }
  OpOperand *sum = nest.getDpsInitOperand(0);
  if (!x || !m || sum->get() == maximum->get() ||
      nest.getMatchingIndexingMap(sum) !=
          max.nest.getMatchingIndexingMap(maximum) ||
      !cast<MemRefType>(sum->get().getType()).getElementType().isF32())
    return false;
  BlockArgument xArg = nest.getMatchingBlockArgument(x);
  BlockArgument mArg = nest.getMatchingBlockArgument(m);
  BlockArgument out = nest.getMatchingBlockArgument(sum);
  auto yield = cast<linalg::YieldOp>(nest.getBody()->getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  auto exp = otherOperand(add, out).getDefiningOp<math::ExpOp>();
  if (!exp)
    return false;
  auto sub = exp.getOperand().getDefiningOp<arith::SubFOp>();
  arith::ExtFOp extension;
  if (!sub || sub.getRhs() != mArg ||
      !readsElement(sub.getLhs(), xArg, extension) ||
      static_cast<bool>(extension) != static_cast<bool>(max.extension) ||
      (extension && extension.getType() != max.extension.getType()))
    return false;
  return bodyOps(nest).size() == (extension ? 4u : 3u);
}

/// The steps between `first` and `last` (both excluded) do nothing to
/// memory, except for one fill of `sum` with zero; that fill.
linalg::FillOp onlySumFillBetween(Operation *first, Operation *last,
                                  Value sum) {
  linalg::FillOp fill;
  for (Operation *op = first->getNextNode(); op != last;
       op = op->getNextNode()) {
    if (isMemoryEffectFree(op))
      continue;
    auto candidate = dyn_cast<linalg::FillOp>(op);
    if (fill || !candidate || candidate.getOutputs().front() != sum ||
        !matchPattern(candidate.getInputs().front(), m_AnyZeroFloat()))
      return nullptr;
    fill = candidate;
  }
  return fill;
}

struct MegOnlineSoftmaxPass
    : public impl::MegOnlineSoftmaxBase<MegOnlineSoftmaxPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::pair<MaxNest, linalg::GenericOp>> pairs;
    for (Block &block : getOperation().getBody()) {
      for (Operation &op : block) {
        auto nest = dyn_cast<linalg::GenericOp>(op);
        std::optional<MaxNest> max = nest ? matchMax(nest) : std::nullopt;
        if (!max)
          continue;
        // The sum-exp nest is the next step that touches memory after the
        // sum's fill.
        for (Operation *next = op.getNextNode(); next;
             next = next->getNextNode()) {
          if (isMemoryEffectFree(next) || isa<linalg::FillOp>(next))
            continue;
          auto sum = dyn_cast<linalg::GenericOp>(next);
          if (sum && matchSumExp(sum, *max) &&
              onlySumFillBetween(nest, sum, sum.getDpsInits().front()))
            pairs.push_back({*max, sum});
          break;
        }
      }
    }
    for (auto [max, sum] : pairs)
      merge(max, sum);
    merged += pairs.size();
  }

  /// One nest at the sum's place: both outputs, the input read once.
  void merge(MaxNest max, linalg::GenericOp sum) {
    OpBuilder b(sum);
    Location loc = sum.getLoc();
    OpOperand *input = max.nest.getDpsInputOperand(0);
    OpOperand *maximum = max.nest.getDpsInitOperand(0);
    AffineMap outputMap = max.nest.getMatchingIndexingMap(maximum);
    Type wide = max.extension ? max.extension.getType() : Type();
    auto online = linalg::GenericOp::create(
        b, loc, TypeRange(), ValueRange{input->get()},
        ValueRange{maximum->get(), sum.getDpsInits().front()},
        ArrayRef<AffineMap>{max.nest.getMatchingIndexingMap(input), outputMap,
                            outputMap},
        max.nest.getIteratorTypesArray(),
        [&](OpBuilder &body, Location loc, ValueRange args) {
          Value element = args[0];
          if (wide)
            element = arith::ExtFOp::create(body, loc, wide, element);
          SoftmaxStatistics next = combineSoftmaxStatistics(
              body, loc, {args[1], args[2]}, {element, Value()});
          linalg::YieldOp::create(body, loc, ValueRange{next.max, next.sum});
        });
    online->setAttr(meg::MegDialect::kOnlineSoftmaxAttrName, b.getUnitAttr());
    sum.erase();
    max.nest.erase();
  }
};

} // namespace
} // namespace megc
