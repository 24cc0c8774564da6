//===- ChunkLoss.cpp - the meg-chunk-loss pass -------------------------===//
//
// Splits the end of a language model's loss (final norm, LM head,
// cross-entropy) into chunks of tokens, so that the tokens x vocabulary
// logits exist one chunk at a time. Each chunk's ops carry meg.loss_chunk;
// meg-remat recomputes a chunk in the backward, where its logits are needed
// again.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGCHUNKLOSS
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `value` as a [rows, last] matrix.
Value asRows(OpBuilder &b, Location loc, Value value) {
  RankedTensorType type = typeOf(value);
  int64_t last = type.getShape().back();
  return ReshapeOp::create(b, loc,
                           type.clone({type.getNumElements() / last, last}),
                           value);
}

struct MegChunkLossPass
    : public mlir::meg::impl::MegChunkLossBase<MegChunkLossPass> {
  using MegChunkLossBase::MegChunkLossBase;

  void runOnOperation() override {
    if (chunks < 1) {
      getOperation().emitError() << "meg-chunk-loss: chunks must be at "
                                    "least 1, got "
                                 << static_cast<int64_t>(chunks);
      return signalPassFailure();
    }
    if (chunks == 1)
      return;
    auto func = getOperation().lookupSymbol<func::FuncOp>(function);
    if (!func)
      return;
    SmallVector<CrossEntropyOp> losses;
    func.walk([&](CrossEntropyOp loss) { losses.push_back(loss); });
    for (CrossEntropyOp loss : losses)
      if (failed(chunk(loss)))
        return signalPassFailure();
  }

  /// cross_entropy(linear(rms_norm(h, w), W), labels) -> the sum over
  /// chunks of rows of h of the same, scaled to the mean.
  LogicalResult chunk(CrossEntropyOp loss) {
    auto head = loss.getLogits().getDefiningOp<LinearOp>();
    if (!head || !loss.getLogits().hasOneUse())
      return success(); // not a language model's head: left alone
    auto norm = head.getInput().getDefiningOp<RmsNormOp>();
    if (norm && !norm->hasOneUse())
      norm = {};
    Value hidden = norm ? norm.getInput() : head.getInput();
    Value labels = loss.getLabels();
    int64_t tokens = typeOf(labels).getNumElements();
    if (typeOf(hidden).getNumElements() / typeOf(hidden).getShape().back() !=
        tokens)
      return success();
    if (tokens % chunks)
      return loss.emitError()
             << "meg-chunk-loss: " << static_cast<int64_t>(chunks)
             << " chunks do not divide the "
             << tokens << " tokens of the loss; choose a divisor";
    int64_t rows = tokens / chunks;
    OpBuilder b(loss);
    Location loc = loss.getLoc();
    Value hiddenRows = asRows(b, loc, hidden);
    auto labelType = typeOf(labels);
    Value labelRows = ReshapeOp::create(b, loc, labelType.clone({tokens}), labels);
    int64_t width = typeOf(hiddenRows).getShape().back();
    Value sum;
    for (int64_t k = 0; k < chunks; ++k) {
      IntegerAttr index = b.getI64IntegerAttr(k);
      auto mark = [&](Value value) {
        value.getDefiningOp()->setAttr(MegDialect::kLossChunkAttrName, index);
        return value;
      };
      Value piece = mark(SliceOp::create(b, loc, hiddenRows,
                                         ArrayRef<int64_t>{k * rows, 0},
                                         ArrayRef<int64_t>{rows, width},
                                         ArrayRef<int64_t>{1, 1}));
      Value pieceLabels = mark(SliceOp::create(
          b, loc, labelRows, ArrayRef<int64_t>{k * rows},
          ArrayRef<int64_t>{rows}, ArrayRef<int64_t>{1}));
      if (norm)
        piece = mark(RmsNormOp::create(b, loc, piece, norm.getWeight(),
                                       norm.getEpsAttr()));
      auto chunkHead =
          LinearOp::create(b, loc, piece, head.getWeight(), head.getBias());
      // The head's tensor-parallel split applies to each chunk's.
      if (Attribute split = head->getAttr(MegDialect::kTpLayerAttrName))
        chunkHead->setAttr(MegDialect::kTpLayerAttrName, split);
      Value logits = mark(chunkHead);
      Value part = mark(CrossEntropyOp::create(b, loc, logits, pieceLabels,
                                               ReduceKind::sum,
                                               loss.getIgnoreIndexAttr()));
      sum = sum ? Value(AddOp::create(b, loc, sum, part)) : part;
    }
    if (loss.getReduction() == ReduceKind::mean) {
      auto scalar = typeOf(sum);
      Value inverse = arith::ConstantOp::create(
          b, loc, scalar,
          DenseElementsAttr::get(
              scalar, b.getFloatAttr(scalar.getElementType(),
                                     1.0 / static_cast<double>(tokens))));
      sum = MulOp::create(b, loc, sum, inverse);
    }
    loss.replaceAllUsesWith(sum);
    loss.erase();
    head.erase();
    if (norm)
      norm.erase();
    ++numChunked;
    return success();
  }
};

} // namespace
