//===- GradPatterns.cpp - backward meg ops to linalg -------------------===//
//
// Vector-Jacobian products of softmax, the activations, cross-entropy,
// rms_norm, layer_norm, the embedding and attention, as f32 reductions and
// elementwise generics. (The RoPE transpose lives with the forward RoPE.)
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

Value constant(OpBuilder &b, Location loc, Value like, double value) {
  return floatConstant(b, loc, like.getType(), value);
}

/// Map of a 1-D tensor indexed by the last of `rank` loop dims.
AffineMap lastDimMap(MLIRContext *context, int64_t rank) {
  return AffineMap::get(rank, 0, {getAffineDimExpr(rank - 1, context)},
                        context);
}

/// All dims but the last: the rows of a normalisation.
SmallVector<int64_t> leadingDims(int64_t rank) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d + 1 < rank; ++d)
    dims.push_back(d);
  return dims;
}

struct SoftmaxGradLowering : public OpRewritePattern<SoftmaxGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = tensorOf(op.getGrad());
    int64_t rank = type.getRank(), axis = op.getAxis();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = reducedMap(op.getContext(), rank, {axis});
    // dx = y (dy - sum(dy y))
    Value dot = buildReduction(
        rewriter, loc, op.getOutput(), {axis}, Combine::Sum, {op.getGrad()},
        {identity}, [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::MulFOp::create(b, l, a[0], a[1]);
        });
    rewriter.replaceOp(
        op,
        buildMapped(rewriter, loc, type, {op.getGrad(), op.getOutput(), dot},
                    {identity, identity, rowMap},
                    [](OpBuilder &b, Location l, ValueRange a) -> Value {
                      return arith::MulFOp::create(
                          b, l, a[1], arith::SubFOp::create(b, l, a[0], a[2]));
                    }));
    return success();
  }
};

/// d silu(x) / dx = s (1 + x (1 - s)), s = sigmoid(x).
Value siluDerivative(OpBuilder &b, Location loc, Value x) {
  Value s = sigmoid(b, loc, x);
  Value one = constant(b, loc, x, 1.0);
  Value inner = arith::AddFOp::create(
      b, loc, one,
      arith::MulFOp::create(b, loc, x, arith::SubFOp::create(b, loc, one, s)));
  return arith::MulFOp::create(b, loc, s, inner);
}

struct SiluGradLowering : public OpRewritePattern<SiluGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SiluGradOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op,
        buildElementwise(rewriter, op.getLoc(), tensorOf(op.getResult()),
                         {op.getGrad(), op.getInput()},
                         [](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return arith::MulFOp::create(
                               b, l, a[0], siluDerivative(b, l, a[1]));
                         }));
    return success();
  }
};

struct SwigluGradLowering : public OpRewritePattern<SwigluGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SwigluGradOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = tensorOf(op.getGrad());
    Location loc = op.getLoc();
    // dgate = dy up silu'(gate); dup = dy silu(gate)
    Value gateGrad = buildElementwise(
        rewriter, loc, type, {op.getGrad(), op.getGate(), op.getUp()},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::MulFOp::create(b, l,
                                       arith::MulFOp::create(b, l, a[0], a[2]),
                                       siluDerivative(b, l, a[1]));
        });
    Value upGrad = buildElementwise(
        rewriter, loc, type, {op.getGrad(), op.getGate()},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value silu = arith::MulFOp::create(b, l, a[1], sigmoid(b, l, a[1]));
          return arith::MulFOp::create(b, l, a[0], silu);
        });
    rewriter.replaceOp(op, {gateGrad, upGrad});
    return success();
  }
};

struct GeluGradLowering : public OpRewritePattern<GeluGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluGradOp op,
                                PatternRewriter &rewriter) const override {
    bool tanhForm = op.getApproximate() == GeluApproximation::tanh;
    Value result = buildElementwise(
        rewriter, op.getLoc(), tensorOf(op.getResult()),
        {op.getGrad(), op.getInput()},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value x = a[1];
          auto c = [&](double v) { return constant(b, l, x, v); };
          Value derivative;
          if (tanhForm) {
            // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 0.044715 x^2)
            Value x2 = arith::MulFOp::create(b, l, x, x);
            Value poly = arith::MulFOp::create(
                b, l, x,
                arith::AddFOp::create(
                    b, l, c(1.0),
                    arith::MulFOp::create(b, l, c(0.044715), x2)));
            Value t = math::TanhOp::create(
                b, l, arith::MulFOp::create(b, l, c(0.7978845608028654), poly));
            Value dpoly = arith::AddFOp::create(
                b, l, c(1.0), arith::MulFOp::create(b, l, c(3 * 0.044715), x2));
            Value sech2 = arith::SubFOp::create(
                b, l, c(1.0), arith::MulFOp::create(b, l, t, t));
            Value second = arith::MulFOp::create(
                b, l,
                arith::MulFOp::create(
                    b, l, arith::MulFOp::create(b, l, c(0.5), x), sech2),
                arith::MulFOp::create(b, l, c(0.7978845608028654), dpoly));
            derivative = arith::AddFOp::create(
                b, l,
                arith::MulFOp::create(b, l, c(0.5),
                                      arith::AddFOp::create(b, l, c(1.0), t)),
                second);
          } else {
            // Phi(x) + x phi(x)
            Value cdf = arith::MulFOp::create(
                b, l, c(0.5),
                arith::AddFOp::create(
                    b, l, c(1.0),
                    math::ErfOp::create(b, l,
                                        arith::MulFOp::create(
                                            b, l, x, c(0.7071067811865476)))));
            Value pdf = arith::MulFOp::create(
                b, l, c(0.3989422804014327),
                math::ExpOp::create(
                    b, l,
                    arith::MulFOp::create(b, l, c(-0.5),
                                          arith::MulFOp::create(b, l, x, x))));
            derivative = arith::AddFOp::create(
                b, l, cdf, arith::MulFOp::create(b, l, x, pdf));
          }
          return arith::MulFOp::create(b, l, a[0], derivative);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// (softmax(logits) - onehot(labels)) * dloss (/ tokens for mean).
struct CrossEntropyGradLowering : public OpRewritePattern<CrossEntropyGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CrossEntropyGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    Value logits = op.getLogits();
    RankedTensorType type = tensorOf(logits);
    int64_t rank = type.getRank(), classes = type.getShape().back();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    SoftmaxStats stats = buildSoftmaxStats(rewriter, loc, logits, rank - 1);
    AffineMap rowMap = stats.rowMap;
    Value max = stats.max, sum = stats.sumExp;
    double tokens = type.getNumElements() / classes;
    double factor = op.getReduction() == ReduceKind::mean ? 1.0 / tokens : 1.0;
    std::optional<int64_t> ignoreIndex = op.getIgnoreIndex();
    Value result = buildMapped(
        rewriter, loc, type, {logits, max, sum, op.getLabels(), op.getGrad()},
        {identity, rowMap, rowMap, rowMap,
         AffineMap::get(rank, 0, {}, context)},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value p = arith::DivFOp::create(
              b, l,
              math::ExpOp::create(b, l,
                                  arith::SubFOp::create(b, l, a[0], a[1])),
              a[2]);
          Value column = linalg::IndexOp::create(b, l, rank - 1);
          Value isLabel =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, column,
                                    clampedIndex(b, l, a[3], classes));
          Value shifted = arith::SelectOp::create(
              b, l, isLabel,
              arith::SubFOp::create(b, l, p, constant(b, l, p, 1.0)), p);
          Value scale = arith::MulFOp::create(b, l, a[4],
                                              constant(b, l, p, factor));
          // An ignored label's row gets no gradient.
          if (ignoreIndex)
            scale = arith::SelectOp::create(
                b, l, countsTowardLoss(b, l, a[3], *ignoreIndex), scale,
                constant(b, l, p, 0.0));
          return arith::MulFOp::create(b, l, shifted, scale);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct RmsNormGradLowering : public OpRewritePattern<RmsNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RmsNormGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    RankedTensorType type = tensorOf(op.getInput());
    int64_t rank = type.getRank(), last = rank - 1;
    double hidden = type.getDimSize(last), eps = op.getEps().convertToDouble();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = reducedMap(context, rank, {last});
    AffineMap weightMap = lastDimMap(context, rank);
    Value x = op.getInput(), dy = op.getGrad(), w = op.getWeight();
    auto rstd = [&](OpBuilder &b, Location l, Value sumSquares) -> Value {
      Value mean = arith::DivFOp::create(b, l, sumSquares,
                                         constant(b, l, sumSquares, hidden));
      return math::RsqrtOp::create(
          b, l, arith::AddFOp::create(b, l, mean, constant(b, l, mean, eps)));
    };
    Value squares =
        buildReduction(rewriter, loc, x, {last}, Combine::Sum, {}, {},
                       [](OpBuilder &b, Location l, ValueRange a) -> Value {
                         return arith::MulFOp::create(b, l, a[0], a[0]);
                       });
    // dot = sum_j dy_j w_j x_j
    Value dot = buildReduction(
        rewriter, loc, x, {last}, Combine::Sum, {dy, w}, {identity, weightMap},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, a[0], a[1]), a[2]);
        });
    // dx = r w dy - r^3 x dot / H
    Value dx = buildMapped(
        rewriter, loc, type, {x, dy, w, squares, dot},
        {identity, identity, weightMap, rowMap, rowMap},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value r = rstd(b, l, a[3]);
          Value r3 =
              arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, r, r), r);
          Value first = arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, r, a[2]), a[1]);
          Value second = arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, r3, a[0]),
              arith::DivFOp::create(b, l, a[4], constant(b, l, a[4], hidden)));
          return arith::SubFOp::create(b, l, first, second);
        });
    // dw = sum over rows of dy x r
    Value dwAcc = buildReduction(
        rewriter, loc, x, leadingDims(rank), Combine::Sum, {dy, squares},
        {identity, rowMap},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, a[0], a[1]), rstd(b, l, a[2]));
        });
    rewriter.replaceOp(op, {dx, finish(rewriter, loc, dwAcc, tensorOf(w))});
    return success();
  }
};

struct LayerNormGradLowering : public OpRewritePattern<LayerNormGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    RankedTensorType type = tensorOf(op.getInput());
    int64_t rank = type.getRank(), last = rank - 1;
    double hidden = type.getDimSize(last), eps = op.getEps().convertToDouble();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = reducedMap(context, rank, {last});
    AffineMap weightMap = lastDimMap(context, rank);
    Value x = op.getInput(), dy = op.getGrad(), w = op.getWeight();

    Value sum = buildReduction(rewriter, loc, x, {last}, Combine::Sum);
    auto mean = [&](OpBuilder &b, Location l, Value total) -> Value {
      return arith::DivFOp::create(b, l, total, constant(b, l, total, hidden));
    };
    Value squares = buildReduction(
        rewriter, loc, x, {last}, Combine::Sum, {sum}, {rowMap},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value d = arith::SubFOp::create(b, l, a[0], mean(b, l, a[1]));
          return arith::MulFOp::create(b, l, d, d);
        });
    // xhat from (x, sum, squares); g = dy (* w).
    auto xhat = [&](OpBuilder &b, Location l, Value xv, Value s, Value sq) {
      Value rstd = math::RsqrtOp::create(
          b, l,
          arith::AddFOp::create(b, l, mean(b, l, sq), constant(b, l, sq, eps)));
      return arith::MulFOp::create(
          b, l, arith::SubFOp::create(b, l, xv, mean(b, l, s)), rstd);
    };
    SmallVector<Value> gInputs = {dy};
    SmallVector<AffineMap> gMaps = {identity};
    if (w) {
      gInputs.push_back(w);
      gMaps.push_back(weightMap);
    }
    auto g = [&](OpBuilder &b, Location l, ValueRange a, size_t at) -> Value {
      return w ? arith::MulFOp::create(b, l, a[at], a[at + 1]).getResult()
               : a[at];
    };
    // sum(g) and sum(g xhat) per row
    Value sumG = buildReduction(
        rewriter, loc, dy, {last}, Combine::Sum,
        ValueRange(gInputs).drop_front(),
        ArrayRef<AffineMap>(gMaps).drop_front(),
        [&](OpBuilder &b, Location l, ValueRange a) { return g(b, l, a, 0); });
    SmallVector<Value> gxInputs = gInputs;
    SmallVector<AffineMap> gxMaps = gMaps;
    gxInputs.append({sum, squares});
    gxMaps.append({rowMap, rowMap});
    Value sumGx = buildReduction(
        rewriter, loc, x, {last}, Combine::Sum, gxInputs, gxMaps,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          size_t n = a.size();
          return arith::MulFOp::create(b, l, g(b, l, a, 1),
                                       xhat(b, l, a[0], a[n - 2], a[n - 1]));
        });
    // dx = rstd (g - mean(g) - xhat mean(g xhat))
    SmallVector<Value> dxInputs = {x, sum, squares, sumG, sumGx};
    SmallVector<AffineMap> dxMaps = {identity, rowMap, rowMap, rowMap, rowMap};
    dxInputs.append(gInputs);
    dxMaps.append(gMaps);
    Value dx = buildMapped(
        rewriter, loc, type, dxInputs, dxMaps,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value xh = xhat(b, l, a[0], a[1], a[2]);
          Value rstd = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, mean(b, l, a[2]),
                                    constant(b, l, a[2], eps)));
          Value inner = arith::SubFOp::create(
              b, l,
              arith::SubFOp::create(b, l, g(b, l, a, 5), mean(b, l, a[3])),
              arith::MulFOp::create(b, l, xh, mean(b, l, a[4])));
          return arith::MulFOp::create(b, l, rstd, inner);
        });
    SmallVector<Value> results = {dx};
    if (w) {
      Value dwAcc =
          buildReduction(rewriter, loc, x, leadingDims(rank), Combine::Sum,
                         {dy, sum, squares}, {identity, rowMap, rowMap},
                         [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                           return arith::MulFOp::create(
                               b, l, a[1], xhat(b, l, a[0], a[2], a[3]));
                         });
      Value dbAcc =
          buildReduction(rewriter, loc, dy, leadingDims(rank), Combine::Sum);
      results.push_back(finish(rewriter, loc, dwAcc, tensorOf(w)));
      results.push_back(finish(rewriter, loc, dbAcc, tensorOf(w)));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// dtable[v, h] = sum over positions p with ids[p] == v of dy[p, h].
/// The table gradient as a scatter-add: each token's output-gradient row
/// is added, in token order, to the row of its id (an id outside the table
/// adds nothing), in f32, rounded once to the table's dtype. A loop over
/// the tokens, with one vector add each: not a comparison of every token
/// with every table row.
struct EmbeddingGradLowering : public OpRewritePattern<EmbeddingGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbeddingGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType tableType = tensorOf(op.getResult());
    RankedTensorType idsType = tensorOf(op.getIds());
    int64_t vocab = tableType.getDimSize(0), dim = tableType.getDimSize(1);
    int64_t tokens = idsType.getNumElements();
    auto accType =
        RankedTensorType::get(tableType.getShape(), rewriter.getF32Type());
    Value ids = reshapeTensor(rewriter, loc, op.getIds(), {tokens});
    // A block of the table starts at row `first` of the whole.
    Value first;
    if (Value firstRow = op.getFirstRow())
      first = arith::IndexCastOp::create(
          rewriter, loc, rewriter.getIndexType(),
          tensor::ExtractOp::create(rewriter, loc, firstRow, ValueRange{}));
    Value grad = reshapeTensor(rewriter, loc, op.getGrad(), {tokens, dim});
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value end = arith::ConstantIndexOp::create(rewriter, loc, tokens);
    Value rows = arith::ConstantIndexOp::create(rewriter, loc, vocab);
    auto rowType = RankedTensorType::get({1, dim}, rewriter.getF32Type());
    auto gradRowType =
        RankedTensorType::get({1, dim}, tableType.getElementType());
    auto loop = scf::ForOp::create(
        rewriter, loc, zero, end, one,
        ValueRange{filledTensor(rewriter, loc, accType, 0.0)},
        [&](OpBuilder &b, Location l, Value t, ValueRange acc) {
          Value id = arith::IndexCastOp::create(
              b, l, b.getIndexType(),
              tensor::ExtractOp::create(b, l, ids, ValueRange{t}));
          if (first)
            id = arith::SubIOp::create(b, l, id, first);
          Value inTable = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, id, zero),
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, id, rows));
          auto branch = scf::IfOp::create(
              b, l, inTable,
              [&](OpBuilder &inner, Location il) {
                SmallVector<OpFoldResult> sizes = {inner.getIndexAttr(1),
                                                   inner.getIndexAttr(dim)};
                SmallVector<OpFoldResult> strides(2, inner.getIndexAttr(1));
                SmallVector<OpFoldResult> at = {id, inner.getIndexAttr(0)};
                SmallVector<OpFoldResult> token = {t, inner.getIndexAttr(0)};
                Value row = tensor::ExtractSliceOp::create(
                    inner, il, rowType, acc[0], at, sizes, strides);
                Value gradRow = tensor::ExtractSliceOp::create(
                    inner, il, gradRowType, grad, token, sizes, strides);
                AffineMap identity = inner.getMultiDimIdentityMap(2);
                auto add = linalg::GenericOp::create(
                    inner, il, TypeRange{rowType}, ValueRange{gradRow},
                    ValueRange{row}, {identity, identity}, parallelIterators(2),
                    [](OpBuilder &nb, Location nl, ValueRange args) {
                      Value sum = arith::AddFOp::create(
                          nb, nl, args[1], toCompute(nb, nl, args[0]));
                      linalg::YieldOp::create(nb, nl, sum);
                    });
                Value updated = tensor::InsertSliceOp::create(
                    inner, il, add.getResult(0), acc[0], at, sizes, strides);
                scf::YieldOp::create(inner, il, updated);
              },
              [&](OpBuilder &inner, Location il) {
                scf::YieldOp::create(inner, il, acc[0]);
              });
          scf::YieldOp::create(b, l, branch.getResult(0));
        });
    Value result = loop.getResult(0);
    if (tableType.getElementType() != accType.getElementType())
      result = finish(rewriter, loc, result, tableType);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Flash-attention style backward with the probabilities recomputed:
/// dV = P^T dO, dP = dO V^T, D = rowsum(dO o O), dS = P (dP - D) scale,
/// dQ = dS K, dK = dS^T Q; grouped heads sum over their query heads.
struct AttentionGradLowering : public OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    RankedTensorType qType = tensorOf(op.getQuery()),
                     kType = tensorOf(op.getKey()),
                     vType = tensorOf(op.getValue());
    int64_t batch = qType.getDimSize(0), seqQ = qType.getDimSize(1),
            heads = qType.getDimSize(2), seqKv = kType.getDimSize(1),
            group = heads / kType.getDimSize(2);
    double scale = op.getScale().convertToDouble();
    auto d = [&](int64_t i) { return getAffineDimExpr(i, context); };
    auto iterators = [](int64_t parallel, int64_t reduction) {
      SmallVector<utils::IteratorType> result = parallelIterators(parallel);
      result.append(reduction, utils::IteratorType::reduction);
      return result;
    };
    Value probs = buildAttentionProbs(rewriter, loc, op.getQuery(), op.getKey(),
                                      op.getPositions(), op.getCausal(), scale);
    Value dout = op.getGrad();

    // Query heads split as [kv head, group] so that the grouped sums are
    // plain reductions: P[b, hk, g, s, t], dO[b, s, hk, g, e], q likewise.
    int64_t kvHeads = heads / group;
    auto splitHeads = [&](Value value, int64_t at) {
      SmallVector<int64_t> shape(tensorOf(value).getShape());
      shape[at] = group;
      shape.insert(shape.begin() + at, kvHeads);
      return reshapeTensor(rewriter, loc, value, shape);
    };
    // dV[b, t, hk, e] = sum_{g, s} P[b, hk, g, s, t] dO[b, s, hk, g, e]
    Value dv = contract(rewriter, loc, vType.getShape(), splitHeads(probs, 1),
                        splitHeads(dout, 2),
                        {mapOf(context, 6, {d(0), d(2), d(4), d(5), d(1)}),
                         mapOf(context, 6, {d(0), d(5), d(2), d(4), d(3)}),
                         mapOf(context, 6, {d(0), d(1), d(2), d(3)})},
                        iterators(4, 2));
    // dP[b, h, s, t] = sum_e dO[b, s, h, e] v[b, t, h / G, e]
    Value dp = contract(
        rewriter, loc, {batch, heads, seqQ, seqKv}, dout, op.getValue(),
        {mapOf(context, 5, {d(0), d(2), d(1), d(4)}),
         mapOf(context, 5, {d(0), d(3), d(1).floorDiv(group), d(4)}),
         mapOf(context, 5, {d(0), d(1), d(2), d(3)})},
        iterators(4, 1));
    // D[b, h, s] = sum_e dO[b, s, h, e] O[b, s, h, e]
    Value rowDot =
        contract(rewriter, loc, {batch, heads, seqQ}, dout, op.getOutput(),
                 {mapOf(context, 4, {d(0), d(2), d(1), d(3)}),
                  mapOf(context, 4, {d(0), d(2), d(1), d(3)}),
                  mapOf(context, 4, {d(0), d(1), d(2)})},
                 iterators(3, 1));
    auto scoresType = cast<RankedTensorType>(probs.getType());
    Value ds = buildMapped(
        rewriter, loc, scoresType, {probs, dp, rowDot},
        {rewriter.getMultiDimIdentityMap(4), rewriter.getMultiDimIdentityMap(4),
         mapOf(context, 4, {d(0), d(1), d(2)})},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value diff = arith::SubFOp::create(b, l, a[1], a[2]);
          return arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, a[0], diff),
              floatConstant(b, l, a[0].getType(), scale));
        });
    // dQ[b, s, h, d] = sum_t dS[b, h, s, t] k[b, t, h / G, d]
    Value dq =
        contract(rewriter, loc, qType.getShape(), ds, op.getKey(),
                 {mapOf(context, 5, {d(0), d(2), d(1), d(4)}),
                  mapOf(context, 5, {d(0), d(4), d(2).floorDiv(group), d(3)}),
                  mapOf(context, 5, {d(0), d(1), d(2), d(3)})},
                 iterators(4, 1));
    // dK[b, t, hk, d] = sum_{g, s} dS[b, hk, g, s, t] q[b, s, hk, g, d]
    Value dk = contract(rewriter, loc, kType.getShape(), splitHeads(ds, 1),
                        splitHeads(op.getQuery(), 2),
                        {mapOf(context, 6, {d(0), d(2), d(4), d(5), d(1)}),
                         mapOf(context, 6, {d(0), d(5), d(2), d(4), d(3)}),
                         mapOf(context, 6, {d(0), d(1), d(2), d(3)})},
                        iterators(4, 2));
    rewriter.replaceOp(op, {finish(rewriter, loc, dq, qType),
                            finish(rewriter, loc, dk, kType),
                            finish(rewriter, loc, dv, vType)});
    return success();
  }
};

} // namespace

void mlir::meg::populateGradPatterns(RewritePatternSet &patterns) {
  patterns
      .add<SoftmaxGradLowering, SiluGradLowering, SwigluGradLowering,
           GeluGradLowering, CrossEntropyGradLowering, RmsNormGradLowering,
           LayerNormGradLowering, EmbeddingGradLowering, AttentionGradLowering>(
          patterns.getContext());
}
