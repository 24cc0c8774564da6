//===- LossPatterns.cpp - cross-entropy to linalg ----------------------===//
//
// Token cross-entropy as a row max, a row sum of exponentials, a per-token
// loss that gathers the label's logit (zero for an ignored label), and a
// final reduction to a scalar; the count of the labels that count.
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"
#include "Patterns.h"

using namespace mlir;
using namespace mlir::meg;

namespace {

struct CrossEntropyLowering : public OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    Value logits = op.getLogits();
    auto logitsType = cast<RankedTensorType>(logits.getType());
    int64_t rank = logitsType.getRank(), classes = logitsType.getShape().back();
    SoftmaxStats stats = buildSoftmaxStats(rewriter, loc, logits, rank - 1);
    Value max = stats.max, sum = stats.sumExp;
    // loss[t] = log(sum[t]) + max[t] - logits[t, label[t]]
    auto tokensType = cast<RankedTensorType>(max.getType());
    int64_t tokenRank = tokensType.getRank();
    AffineMap identity = rewriter.getMultiDimIdentityMap(tokenRank);
    std::optional<int64_t> ignoreIndex = op.getIgnoreIndex();
    Value perToken = buildMapped(
        rewriter, loc, tokensType, {max, sum, op.getLabels()},
        {identity, identity, identity},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> index;
          for (int64_t d = 0; d < tokenRank; ++d)
            index.push_back(linalg::IndexOp::create(b, l, d));
          index.push_back(clampedIndex(b, l, a[2], classes));
          Value target =
              toCompute(b, l, tensor::ExtractOp::create(b, l, logits, index));
          Value logSumExp = arith::AddFOp::create(
              b, l, math::LogOp::create(b, l, a[1]), a[0]);
          Value loss = arith::SubFOp::create(b, l, logSumExp, target);
          if (!ignoreIndex)
            return loss;
          return arith::SelectOp::create(
              b, l, countsTowardLoss(b, l, a[2], *ignoreIndex), loss,
              floatConstant(b, l, loss.getType(), 0.0));
        });
    SmallVector<int64_t> all;
    for (int64_t d = 0; d < tokenRank; ++d)
      all.push_back(d);
    Value total = tokenRank
                      ? buildReduction(rewriter, loc, perToken, all,
                                       Combine::Sum)
                      : perToken;
    double count = tokensType.getNumElements();
    bool mean = op.getReduction() == ReduceKind::mean;
    Value result = buildMapped(
        rewriter, loc, cast<RankedTensorType>(op.getResult().getType()),
        {total}, {AffineMap::get(0, 0, {}, context)},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          if (!mean)
            return a[0];
          return arith::DivFOp::create(
              b, l, a[0], floatConstant(b, l, a[0].getType(), count));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Whether `label` is the class of column `column` of a block of classes
/// starting at `first` (a 0-d i32 tensor).
static Value isLabelColumn(OpBuilder &b, Location l, Value label, Value column,
                           Value first) {
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                               localIndex(b, l, label, first), column);
}

/// A row sum of exp(logits - max) over this rank's classes, and per token
/// the label's logit when it is one of them and whether it counts.
struct VocabShardStatsLowering : public OpRewritePattern<VocabShardStatsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(VocabShardStatsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = op.getLogits();
    auto logitsType = cast<RankedTensorType>(logits.getType());
    int64_t rank = logitsType.getRank(), classes = logitsType.getShape().back();
    AffineMap rowMap = reducedMap(op.getContext(), rank, {rank - 1});
    Value sumExp = buildReduction(
        rewriter, loc, logits, {rank - 1}, Combine::Sum, {op.getMax()},
        {rowMap}, [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return math::ExpOp::create(b, l,
                                     arith::SubFOp::create(b, l, a[0], a[1]));
        });
    auto tokensType = cast<RankedTensorType>(op.getMax().getType());
    int64_t tokenRank = tokensType.getRank();
    AffineMap identity = rewriter.getMultiDimIdentityMap(tokenRank);
    Value first = op.getFirstClass();
    Value target = buildMapped(
        rewriter, loc, tokensType, {op.getLabels()}, {identity},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          BlockIndex label = blockIndex(b, l, a[0], first, classes);
          SmallVector<Value> index;
          for (int64_t d = 0; d < tokenRank; ++d)
            index.push_back(linalg::IndexOp::create(b, l, d));
          index.push_back(label.index);
          Value logit =
              toCompute(b, l, tensor::ExtractOp::create(b, l, logits, index));
          return arith::SelectOp::create(
              b, l, label.inBlock, logit,
              floatConstant(b, l, logit.getType(), 0.0));
        });
    std::optional<int64_t> ignoreIndex = op.getIgnoreIndex();
    Value mask = buildMapped(
        rewriter, loc, tokensType, {op.getLabels()}, {identity},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type f32 = b.getF32Type();
          if (!ignoreIndex)
            return floatConstant(b, l, f32, 1.0);
          return arith::SelectOp::create(
              b, l, countsTowardLoss(b, l, a[0], *ignoreIndex),
              floatConstant(b, l, f32, 1.0), floatConstant(b, l, f32, 0.0));
        });
    rewriter.replaceOp(op, {sumExp, target, mask});
    return success();
  }
};

/// dlogits = dsum_exp * exp(logits - max) + dtarget at the label's column.
struct VocabShardStatsGradLowering
    : public OpRewritePattern<VocabShardStatsGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(VocabShardStatsGradOp op,
                                PatternRewriter &rewriter) const override {
    Value logits = op.getLogits();
    auto type = cast<RankedTensorType>(logits.getType());
    int64_t rank = type.getRank();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = reducedMap(op.getContext(), rank, {rank - 1});
    Value first = op.getFirstClass();
    Value result = buildMapped(
        rewriter, op.getLoc(), type,
        {logits, op.getMax(), op.getSumExpGrad(), op.getTargetGrad(),
         op.getLabels()},
        {identity, rowMap, rowMap, rowMap, rowMap},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value p = math::ExpOp::create(b, l,
                                        arith::SubFOp::create(b, l, a[0], a[1]));
          Value grad = arith::MulFOp::create(b, l, a[2], p);
          Value column = linalg::IndexOp::create(b, l, rank - 1);
          return arith::SelectOp::create(
              b, l, isLabelColumn(b, l, a[4], column, first),
              arith::AddFOp::create(b, l, grad, a[3]), grad);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// The count as a sum of ones over the labels that count, in f32 (exact up
/// to 2^24 labels).
struct LabelCountLowering : public OpRewritePattern<LabelCountOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LabelCountOp op,
                                PatternRewriter &rewriter) const override {
    Value labels = op.getLabels();
    int64_t rank = cast<RankedTensorType>(labels.getType()).getRank();
    int64_t ignoreIndex = op.getIgnoreIndex();
    SmallVector<int64_t> all;
    for (int64_t d = 0; d < rank; ++d)
      all.push_back(d);
    Value count = buildReduction(
        rewriter, op.getLoc(), labels, all, Combine::Sum, {}, {},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type f32 = b.getF32Type();
          return arith::SelectOp::create(
              b, l, countsTowardLoss(b, l, a[0], ignoreIndex),
              floatConstant(b, l, f32, 1.0), floatConstant(b, l, f32, 0.0));
        });
    rewriter.replaceOp(op, count);
    return success();
  }
};

} // namespace

void mlir::meg::populateLossPatterns(RewritePatternSet &patterns) {
  patterns.add<CrossEntropyLowering, LabelCountLowering,
               VocabShardStatsLowering, VocabShardStatsGradLowering>(
      patterns.getContext());
}
