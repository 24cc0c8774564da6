//===- NormPatterns.cpp - normalisation, softmax and RoPE to linalg ----===//
//
// rms_norm, layer_norm and softmax as f32 row reductions followed by one
// elementwise generic; the fused RoPE as one generic that reads each
// element's rotation partner (over the channels split into pairs when the
// whole head rotates, so that every access is affine).
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

/// Map reading a 1-D tensor indexed by the last loop dim.
AffineMap lastDimMap(MLIRContext *context, int64_t rank) {
  return AffineMap::get(rank, 0, {getAffineDimExpr(rank - 1, context)},
                        context);
}

struct RmsNormLowering : public OpRewritePattern<RmsNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RmsNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = tensorOf(op.getInput());
    int64_t rank = type.getRank(), last = rank - 1;
    double hidden = type.getDimSize(last);
    double eps = op.getEps().convertToDouble();
    Value sumSquares = buildReduction(
        rewriter, loc, op.getInput(), {last}, Combine::Sum, {}, {},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          return arith::MulFOp::create(b, l, a[0], a[0]);
        });
    MLIRContext *context = op.getContext();
    Value result = buildMapped(
        rewriter, loc, type, {op.getInput(), sumSquares, op.getWeight()},
        {rewriter.getMultiDimIdentityMap(rank),
         reducedMap(context, rank, {last}), lastDimMap(context, rank)},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type f32 = a[0].getType();
          Value meanSquare = arith::DivFOp::create(
              b, l, a[1], floatConstant(b, l, f32, hidden));
          Value scale = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, meanSquare,
                                    floatConstant(b, l, f32, eps)));
          return arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, a[0], scale), a[2]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LayerNormLowering : public OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    RankedTensorType type = tensorOf(op.getInput());
    int64_t rank = type.getRank(), last = rank - 1;
    double hidden = type.getDimSize(last);
    double eps = op.getEps().convertToDouble();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = reducedMap(context, rank, {last});

    Value sum = buildReduction(rewriter, loc, op.getInput(), {last},
                               Combine::Sum);
    auto divide = [&](OpBuilder &b, Location l, Value v) -> Value {
      return arith::DivFOp::create(b, l, v,
                                   floatConstant(b, l, v.getType(), hidden));
    };
    // Two passes: the variance sums squared deviations from the mean.
    Value squares = buildReduction(
        rewriter, loc, op.getInput(), {last}, Combine::Sum, {sum}, {rowMap},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value d = arith::SubFOp::create(b, l, a[0], divide(b, l, a[1]));
          return arith::MulFOp::create(b, l, d, d);
        });
    SmallVector<Value> inputs = {op.getInput(), sum, squares};
    SmallVector<AffineMap> maps = {identity, rowMap, rowMap};
    bool affine = static_cast<bool>(op.getWeight());
    if (affine) {
      inputs.append({op.getWeight(), op.getBias()});
      maps.append({lastDimMap(context, rank), lastDimMap(context, rank)});
    }
    Value result = buildMapped(
        rewriter, loc, type, inputs, maps,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type f32 = a[0].getType();
          Value centred = arith::SubFOp::create(b, l, a[0], divide(b, l, a[1]));
          Value scale = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, divide(b, l, a[2]),
                                    floatConstant(b, l, f32, eps)));
          Value normed = arith::MulFOp::create(b, l, centred, scale);
          if (!affine)
            return normed;
          return arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, normed, a[3]), a[4]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SoftmaxLowering : public OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = tensorOf(op.getInput());
    int64_t rank = type.getRank(), axis = op.getAxis();
    SoftmaxStats stats =
        buildSoftmaxStats(rewriter, loc, op.getInput(), axis);
    Value result = buildMapped(
        rewriter, loc, type, {op.getInput(), stats.max, stats.sumExp},
        {rewriter.getMultiDimIdentityMap(rank), stats.rowMap, stats.rowMap},
        [](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value e = math::ExpOp::create(b, l,
                                        arith::SubFOp::create(b, l, a[0], a[1]));
          return arith::DivFOp::create(b, l, e, a[2]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Index helpers for scalar code inside generic bodies.
struct IndexMath {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
};

/// One RoPE output in f32: x cos -+ xp sin, where the first of a pair
/// subtracts its partner going forward and adds it going backward.
Value rotateWithPartner(OpBuilder &b, Location l, Value x, Value xp, Value cv,
                        Value sv, Value first, bool transpose) {
  IndexMath m{b, l};
  Value rot = arith::MulFOp::create(b, l, xp, sv);
  Value negated = arith::NegFOp::create(b, l, rot);
  Value signedRot = transpose ? m.select(first, rot, negated)
                              : m.select(first, negated, rot);
  return arith::AddFOp::create(b, l, arith::MulFOp::create(b, l, x, cv),
                               signedRot);
}

/// RoPE over the whole head dim as one generic over the input viewed with
/// the channel split into pairs: [d0, d1, d2, 2, half] for half-split
/// (element (j, k) pairs with (1 - j, k)) or [d0, d1, d2, half, 2] for
/// interleaved ((k, j) with (k, 1 - j)). Every operand is read at an affine
/// index, so the loops read and write contiguous runs (interleaved: pairs
/// of neighbours, which the vectorizer handles as interleaved groups once
/// the pair loop is unrolled); the result is written through the map back
/// to channels. The arithmetic is buildRope's, operation for operation.
Value buildPairedRope(OpBuilder &b, Location loc, Value input, Value cosTable,
                      Value sinTable, int64_t seqDim, bool interleaved,
                      bool transpose) {
  RankedTensorType type = tensorOf(input);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rotary = shape[3], half = rotary / 2, seq = shape[seqDim];
  MLIRContext *context = b.getContext();
  SmallVector<int64_t> pairs =
      interleaved ? SmallVector<int64_t>{half, 2} : SmallVector<int64_t>{2, half};
  Value x = tensor::ExpandShapeOp::create(
      b, loc,
      RankedTensorType::get({shape[0], shape[1], shape[2], pairs[0], pairs[1]},
                            type.getElementType()),
      input, SmallVector<ReassociationIndices>{{0}, {1}, {2}, {3, 4}});
  // Tables longer than the sequence are read on their first rows.
  auto paired = [&](Value table) -> Value {
    RankedTensorType tableType = tensorOf(table);
    if (tableType.getDimSize(0) != seq)
      table = tensor::ExtractSliceOp::create(
          b, loc, table,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(seq), b.getIndexAttr(rotary)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    return tensor::ExpandShapeOp::create(
        b, loc,
        RankedTensorType::get({seq, pairs[0], pairs[1]},
                              tableType.getElementType()),
        table, SmallVector<ReassociationIndices>{{0}, {1, 2}});
  };
  Value cos = paired(cosTable), sin = paired(sinTable);
  SmallVector<AffineExpr> d;
  for (unsigned i = 0; i < 5; ++i)
    d.push_back(getAffineDimExpr(i, context));
  // The dim that says which member of its pair an element is.
  unsigned member = interleaved ? 4 : 3;
  SmallVector<AffineExpr> at = {d[3], d[4]}, partner = at;
  partner[member - 3] = 1 - d[member];
  AffineExpr s = d[seqDim];
  auto map = [&](ArrayRef<AffineExpr> results) {
    return AffineMap::get(5, 0, results, context);
  };
  SmallVector<AffineMap> maps = {
      map({d[0], d[1], d[2], at[0], at[1]}),
      map({d[0], d[1], d[2], partner[0], partner[1]}),
      map({s, at[0], at[1]}),
      map({s, transpose ? partner[0] : at[0], transpose ? partner[1] : at[1]}),
      map({d[0], d[1], d[2], d[3] * pairs[1] + d[4]})};
  Type element = type.getElementType();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{x, x, cos, sin},
      ValueRange{emptyTensor(b, loc, type)}, maps, parallelIterators(5),
      [&](OpBuilder &nested, Location l, ValueRange args) {
        Value xv = toCompute(nested, l, args[0]);
        Value xp = toCompute(nested, l, args[1]);
        Value cv = toCompute(nested, l, args[2]);
        Value sv = toCompute(nested, l, args[3]);
        IndexMath m{nested, l};
        Value first = arith::CmpIOp::create(
            nested, l, arith::CmpIPredicate::eq,
            linalg::IndexOp::create(nested, l, member), m.c(0));
        Value rotated =
            rotateWithPartner(nested, l, xv, xp, cv, sv, first, transpose);
        linalg::YieldOp::create(nested, l,
                                convertScalar(nested, l, rotated, element));
      });
  return generic.getResult(0);
}

/// The fused RoPE and its exact transpose as one generic over the input:
///   forward:  y[c] = x[c] cos[s, c] - x[p] sin[s, c]   (c the first of its
///             pair), y[c] = x[c] cos[s, c] + x[p] sin[s, c] otherwise;
///   backward: dx[c] = dy[c] cos[s, c] + dy[p] sin[s, p] (first),
///             dx[c] = dy[c] cos[s, c] - dy[p] sin[s, p] otherwise,
/// where p is c's partner (c +- half, or the neighbour when interleaved);
/// channels past the rotary dim are copied. Reads are clamped in range so
/// that tail lanes compute values the final select discards.
Value buildRope(OpBuilder &builder, Location loc, Value input, Value cosTable,
                Value sinTable, RopeLayout layout, bool interleaved,
                bool transpose) {
  RankedTensorType type = tensorOf(input);
  int64_t rotary = tensorOf(cosTable).getShape().back(), half = rotary / 2;
  int64_t seqDim = layout == RopeLayout::bshd ? 1 : 0;
  if (rotary == type.getShape().back())
    return buildPairedRope(builder, loc, input, cosTable, sinTable, seqDim,
                           interleaved, transpose);
  return buildMapped(
      builder, loc, type, {input}, {builder.getMultiDimIdentityMap(4)},
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        IndexMath m{b, l};
        SmallVector<Value> index;
        for (int64_t d = 0; d < 4; ++d)
          index.push_back(linalg::IndexOp::create(b, l, d));
        Value channel = index[3];
        Value inRotary = m.lt(channel, m.c(rotary));
        Value c = m.min(channel, m.c(rotary - 1));
        Value first, partner;
        if (interleaved) {
          Value odd = arith::CmpIOp::create(
              b, l, arith::CmpIPredicate::ne,
              arith::RemSIOp::create(b, l, c, m.c(2)), m.c(0));
          first = arith::XOrIOp::create(
              b, l, odd, arith::ConstantIntOp::create(b, l, 1, 1));
          partner = m.select(odd, m.sub(c, m.c(1)), m.add(c, m.c(1)));
        } else {
          first = m.lt(c, m.c(half));
          partner = m.select(first, m.add(c, m.c(half)), m.sub(c, m.c(half)));
        }
        SmallVector<Value> partnerIndex(index);
        partnerIndex[3] = partner;
        Value x = a[0];
        Value xp = toCompute(
            b, l, tensor::ExtractOp::create(b, l, input, partnerIndex));
        Value s = index[seqDim];
        Value cv = toCompute(
            b, l, tensor::ExtractOp::create(b, l, cosTable, ValueRange{s, c}));
        Value sinColumn = transpose ? partner : c;
        Value sv = toCompute(b, l,
                             tensor::ExtractOp::create(
                                 b, l, sinTable, ValueRange{s, sinColumn}));
        Value rotated =
            rotateWithPartner(b, l, x, xp, cv, sv, first, transpose);
        return m.select(inRotary, rotated, x);
      });
}

struct RopeLowering : public OpRewritePattern<RopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RopeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildRope(rewriter, op.getLoc(), op.getInput(),
                                     op.getCos(), op.getSin(), op.getLayout(),
                                     op.getInterleaved(), /*transpose=*/false));
    return success();
  }
};

struct RopeGradLowering : public OpRewritePattern<RopeGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RopeGradOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildRope(rewriter, op.getLoc(), op.getGrad(),
                                     op.getCos(), op.getSin(), op.getLayout(),
                                     op.getInterleaved(), /*transpose=*/true));
    return success();
  }
};

} // namespace

void mlir::meg::populateNormPatterns(RewritePatternSet &patterns) {
  patterns.add<RmsNormLowering, LayerNormLowering, SoftmaxLowering,
               RopeLowering, RopeGradLowering>(patterns.getContext());
}
