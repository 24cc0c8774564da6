//===- ContractionPatterns.cpp - matmul, linear, attention, embedding --===//
//
// Contractions as linalg.generic with f32 accumulation (the program
// lowering replaces matrix products by library calls before this runs; this
// form is the reference and the fallback), attention as scores, masked
// softmax and a second contraction, and the embedding gather.
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"
#include "Patterns.h"


using namespace mlir;
using namespace mlir::meg;

namespace {

RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

struct MatmulLowering : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *context = op.getContext();
    RankedTensorType resultType = tensorOf(op.getResult());
    RankedTensorType rhsType = tensorOf(op.getRhs());
    int64_t batch = resultType.getRank() - 2;
    int64_t loops = batch + 3; // batch..., m, n, k
    auto d = [&](int64_t i) { return getAffineDimExpr(i, context); };
    AffineExpr m = d(batch), n = d(batch + 1), k = d(batch + 2);
    SmallVector<AffineExpr> lhs, rhs, out;
    for (int64_t i = 0; i < batch; ++i) {
      lhs.push_back(d(i));
      out.push_back(d(i));
      if (rhsType.getRank() > 2)
        rhs.push_back(d(i));
    }
    lhs.append(op.getTransposeLhs() ? SmallVector<AffineExpr>{k, m}
                                    : SmallVector<AffineExpr>{m, k});
    rhs.append(op.getTransposeRhs() ? SmallVector<AffineExpr>{n, k}
                                    : SmallVector<AffineExpr>{k, n});
    out.append({m, n});
    SmallVector<utils::IteratorType> iterators = parallelIterators(loops);
    iterators.back() = utils::IteratorType::reduction;
    Value acc = contract(rewriter, op.getLoc(), resultType.getShape(),
                         op.getLhs(), op.getRhs(),
                         {mapOf(context, loops, lhs), mapOf(context, loops, rhs),
                          mapOf(context, loops, out)},
                         iterators);
    rewriter.replaceOp(op, finish(rewriter, op.getLoc(), acc, resultType));
    return success();
  }
};

struct LinearLowering : public OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *context = op.getContext();
    RankedTensorType resultType = tensorOf(op.getResult());
    int64_t rows = resultType.getRank() - 1;
    int64_t loops = rows + 2; // rows..., out, in
    auto d = [&](int64_t i) { return getAffineDimExpr(i, context); };
    SmallVector<AffineExpr> x, out;
    for (int64_t i = 0; i < rows; ++i) {
      x.push_back(d(i));
      out.push_back(d(i));
    }
    x.push_back(d(rows + 1));
    out.push_back(d(rows));
    SmallVector<utils::IteratorType> iterators = parallelIterators(loops);
    iterators.back() = utils::IteratorType::reduction;
    Value acc = contract(
        rewriter, op.getLoc(), resultType.getShape(), op.getInput(),
        op.getWeight(),
        {mapOf(context, loops, x),
         mapOf(context, loops, {d(rows), d(rows + 1)}),
         mapOf(context, loops, out)},
        iterators);
    rewriter.replaceOp(op, finish(rewriter, op.getLoc(), acc, resultType,
                                  op.getBias()));
    return success();
  }
};

/// softmax(q k^T scale + mask) v per head with grouped KV heads. On the CPU
/// the scores are materialised per (batch, head).
struct AttentionLowering : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    RankedTensorType q = tensorOf(op.getQuery()), k = tensorOf(op.getKey());
    RankedTensorType resultType = tensorOf(op.getResult());
    int64_t group = q.getDimSize(2) / k.getDimSize(2);
    auto d = [&](int64_t i) { return getAffineDimExpr(i, context); };

    Value probs = buildAttentionProbs(rewriter, loc, op.getQuery(), op.getKey(),
                                      op.getPositions(), op.getCausal(),
                                      op.getScale().convertToDouble());
    SmallVector<utils::IteratorType> iterators = parallelIterators(5);
    iterators.back() = utils::IteratorType::reduction;

    // out[b, s, h, e] = sum_t p[b, h, s, t] v[b, t, h / group, e]
    Value acc = contract(
        rewriter, loc, resultType.getShape(), probs, op.getValue(),
        {mapOf(context, 5, {d(0), d(2), d(1), d(4)}),
         mapOf(context, 5, {d(0), d(4), d(2).floorDiv(group), d(3)}),
         mapOf(context, 5, {d(0), d(1), d(2), d(3)})},
        iterators);
    rewriter.replaceOp(op, finish(rewriter, loc, acc, resultType));
    return success();
  }
};

struct EmbeddingLowering : public OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType resultType = tensorOf(op.getResult());
    RankedTensorType tableType = tensorOf(op.getTable());
    int64_t rank = resultType.getRank();
    SmallVector<AffineExpr> idExprs;
    for (int64_t i = 0; i + 1 < rank; ++i)
      idExprs.push_back(rewriter.getAffineDimExpr(i));
    Value table = op.getTable();
    Value firstRow = op.getFirstRow();
    int64_t rows = tableType.getDimSize(0);
    Value result = buildMapped(
        rewriter, op.getLoc(), resultType, {op.getIds()},
        {AffineMap::get(rank, 0, idExprs, op.getContext())},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value column = linalg::IndexOp::create(b, l, rank - 1);
          if (!firstRow) {
            Value row = clampedIndex(b, l, a[0], rows);
            return toCompute(
                b, l, tensor::ExtractOp::create(b, l, table,
                                                ValueRange{row, column}));
          }
          // A block of the table: rows outside it read as zeros.
          BlockIndex row = blockIndex(b, l, a[0], firstRow, rows);
          Value value = toCompute(
              b, l, tensor::ExtractOp::create(b, l, table,
                                              ValueRange{row.index, column}));
          return arith::SelectOp::create(
              b, l, row.inBlock, value,
              floatConstant(b, l, value.getType(), 0.0));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::meg::populateContractionPatterns(RewritePatternSet &patterns) {
  patterns.add<MatmulLowering, LinearLowering, AttentionLowering,
               EmbeddingLowering>(patterns.getContext());
}
