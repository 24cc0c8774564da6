//===- MoePatterns.cpp - mixture-of-experts ops to linalg --------------===//
//
// The router, the capacity assignment and the row gathers as linalg
// generics. Top-k selection and slot assignment are ranks computed by
// counting (how many candidates come before this one), so every kernel is a
// parallel loop nest with at most a sum over the candidates, deterministic
// on any grid.
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"
#include "Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Body of a loop nest: the new accumulator (or element) from the loop
/// indices, the inputs' elements and the current accumulator.
using LoopFn = llvm::function_ref<Value(OpBuilder &, Location, ValueRange,
                                        ValueRange, Value)>;

/// One input of a loop nest and the loops that index it.
struct Read {
  Value tensor;
  SmallVector<int64_t> dims;
};

/// A generic over `loops` whose last `reduced` loops are a sum into
/// `element` tensors of the other loops' extents, starting from `init`
/// (with `reduced` = 0, an elementwise loop nest that writes fn's value).
/// The reads (which must together index every reduced loop) come to `fn`
/// as elements; `fn` may read other tensors with tensor.extract.
Value buildLoops(OpBuilder &b, Location loc, ArrayRef<int64_t> loops,
                 int64_t reduced, Type element, TypedAttr init,
                 ArrayRef<Read> reads, LoopFn fn) {
  int64_t rank = static_cast<int64_t>(loops.size());
  auto type = RankedTensorType::get(loops.drop_back(reduced), element);
  Value out = emptyTensor(b, loc, type);
  if (reduced > 0)
    out = linalg::FillOp::create(b, loc,
                                 ValueRange{arith::ConstantOp::create(
                                     b, loc, element, init)},
                                 ValueRange{out})
              .getResult(0);
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (const Read &read : reads) {
    inputs.push_back(read.tensor);
    SmallVector<AffineExpr> exprs;
    for (int64_t d : read.dims)
      exprs.push_back(b.getAffineDimExpr(d));
    maps.push_back(AffineMap::get(rank, 0, exprs, b.getContext()));
  }
  SmallVector<AffineExpr> kept;
  for (int64_t d = 0; d < rank - reduced; ++d)
    kept.push_back(b.getAffineDimExpr(d));
  maps.push_back(AffineMap::get(rank, 0, kept, b.getContext()));
  SmallVector<utils::IteratorType> iterators = parallelIterators(rank);
  for (int64_t d = rank - reduced; d < rank; ++d)
    iterators[d] = utils::IteratorType::reduction;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, inputs, ValueRange{out}, maps, iterators,
      [&](OpBuilder &nested, Location l, ValueRange args) {
        SmallVector<Value> indices;
        for (int64_t d = 0; d < rank; ++d)
          indices.push_back(linalg::IndexOp::create(nested, l, d));
        linalg::YieldOp::create(
            nested, l,
            fn(nested, l, indices, args.drop_back(), args.back()));
      });
  return generic.getResult(0);
}

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}
Value i32Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
}
Value f32Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}
Value extract(OpBuilder &b, Location loc, Value tensor, ValueRange indices) {
  return tensor::ExtractOp::create(b, loc, tensor, indices);
}
Value toI32(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}
/// `acc + (condition ? value : 0)` on i32.
Value countIf(OpBuilder &b, Location loc, Value acc, Value condition,
              Value value) {
  return arith::AddIOp::create(
      b, loc, acc,
      arith::SelectOp::create(b, loc, condition, value,
                              i32Constant(b, loc, 0)));
}
/// Whether candidate (value, index) ranks before (otherValue, otherIndex):
/// larger, or equal with the lower index.
Value ranksBefore(OpBuilder &b, Location loc, Value value, Value index,
                  Value otherValue, Value otherIndex) {
  Value larger = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                       value, otherValue);
  Value equal = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                      value, otherValue);
  Value lower = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      index, otherIndex);
  return arith::OrIOp::create(b, loc, larger,
                              arith::AndIOp::create(b, loc, equal, lower));
}

/// The rank of each element of `candidates` along its last dimension:
/// how many elements of its row rank before it.
Value rankAlongLast(OpBuilder &b, Location loc, Value candidates) {
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(candidates.getType()).getShape();
  int64_t rank = static_cast<int64_t>(shape.size());
  SmallVector<int64_t> loops(shape), mine, theirs;
  loops.push_back(shape.back());
  for (int64_t d = 0; d < rank; ++d) {
    mine.push_back(d);
    theirs.push_back(d + 1 == rank ? rank : d);
  }
  return buildLoops(
      b, loc, loops, 1, b.getI32Type(), b.getI32IntegerAttr(0),
      {{candidates, mine}, {candidates, theirs}},
      [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value acc) {
        return countIf(n, l, acc,
                       ranksBefore(n, l, v[1], i[rank], v[0], i[rank - 1]),
                       i32Constant(n, l, 1));
      });
}

struct MoeRouteLowering : public OpRewritePattern<MoeRouteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoeRouteOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value scores = op.getScores(), bias = op.getBias();
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(scores.getType()).getShape();
    int64_t tokens = shape[0], experts = shape[1];
    int64_t groups = op.getGroups(), perGroup = experts / groups;
    int64_t topK = op.getTopK(), topGroups = op.getTopGroups();
    Type f32 = b.getF32Type(), i32 = b.getI32Type();
    TypedAttr zeroF = b.getF32FloatAttr(0.0), zeroI = b.getI32IntegerAttr(0);

    // The biased scores the selection ranks.
    Value biased = buildLoops(
        b, loc, {tokens, experts}, 0, f32, zeroF,
        {{scores, {0, 1}}, {bias, {1}}},
        [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value) {
          return arith::AddFOp::create(n, l, v[0], v[1]);
        });
    Value candidates = biased;
    if (groups > 1) {
      // A group's score: the sum of its two best biased scores.
      Value grouped = reshapeTensor(b, loc, biased, {tokens, groups, perGroup});
      Value inGroup = rankAlongLast(b, loc, grouped);
      Value groupScores = buildLoops(
          b, loc, {tokens, groups, perGroup}, 1, f32, zeroF,
          {{grouped, {0, 1, 2}}, {inGroup, {0, 1, 2}}},
          [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value acc) {
            Value best = arith::CmpIOp::create(n, l, arith::CmpIPredicate::slt,
                                               v[1], i32Constant(n, l, 2));
            return arith::AddFOp::create(
                n, l, acc,
                arith::SelectOp::create(n, l, best, v[0],
                                        f32Constant(n, l, 0.0)));
          });
      Value groupRank = rankAlongLast(b, loc, groupScores);
      // Experts of the groups not kept can never be chosen.
      Value kept = buildLoops(
          b, loc, {tokens, groups, perGroup}, 0, f32, zeroF,
          {{grouped, {0, 1, 2}}, {groupRank, {0, 1}}},
          [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value) {
            Value keep = arith::CmpIOp::create(n, l, arith::CmpIPredicate::slt,
                                               v[1],
                                               i32Constant(n, l, topGroups));
            return arith::SelectOp::create(
                n, l, keep, v[0],
                f32Constant(n, l, -std::numeric_limits<double>::infinity()));
          });
      candidates = reshapeTensor(b, loc, kept, {tokens, experts});
    }
    Value rank = rankAlongLast(b, loc, candidates);
    // The j-th choice is the expert of rank j.
    Value chosen = buildLoops(
        b, loc, {tokens, topK, experts}, 1, i32, zeroI, {{rank, {0, 2}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value acc) {
          Value isJth = arith::CmpIOp::create(n, l, arith::CmpIPredicate::eq,
                                              v[0], toI32(n, l, i[1]));
          return countIf(n, l, acc, isJth, toI32(n, l, i[2]));
        });
    Value raw = buildLoops(
        b, loc, {tokens, topK}, 0, f32, zeroF, {{chosen, {0, 1}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value) {
          return extract(n, l, scores,
                         {i[0], clampedIndex(n, l, v[0], experts)});
        });
    double scaling = op.getScaling().convertToDouble();
    Value sum;
    if (op.getNormalize())
      sum = buildLoops(
          b, loc, {tokens, topK}, 1, f32, zeroF, {{raw, {0, 1}}},
          [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value acc) {
            return arith::AddFOp::create(n, l, acc, v[0]);
          });
    SmallVector<Read> reads = {{raw, {0, 1}}};
    if (sum)
      reads.push_back({sum, {0}});
    Value weights = buildLoops(
        b, loc, {tokens, topK}, 0, f32, zeroF, reads,
        [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value) {
          Value w = v[0];
          if (sum)
            w = arith::DivFOp::create(
                n, l, w,
                arith::AddFOp::create(n, l, v[1], f32Constant(n, l, 1e-20)));
          return arith::MulFOp::create(n, l, w, f32Constant(n, l, scaling));
        });
    b.replaceOp(op, {chosen, weights});
    return success();
  }
};

struct MoeRouteGradLowering : public OpRewritePattern<MoeRouteGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoeRouteGradOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value grad = op.getWeightsGrad(), scores = op.getScores(),
          experts = op.getExperts();
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(scores.getType()).getShape();
    int64_t tokens = shape[0], numExperts = shape[1];
    int64_t topK = cast<RankedTensorType>(experts.getType()).getDimSize(1);
    Type f32 = b.getF32Type();
    TypedAttr zero = b.getF32FloatAttr(0.0);
    // The chosen experts' unbiased scores.
    Value raw = buildLoops(
        b, loc, {tokens, topK}, 0, f32, zero, {{experts, {0, 1}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value) {
          return extract(n, l, scores,
                         {i[0], clampedIndex(n, l, v[0], numExperts)});
        });
    // d weights_j / d s_l = scaling (delta_jl / D - s_j / D^2) with
    // D = sum s + 1e-20, so d s_l = scaling (g_l / D - sum_j g_j s_j / D^2).
    Value sum, dot;
    if (op.getNormalize()) {
      sum = buildLoops(
          b, loc, {tokens, topK}, 1, f32, zero, {{raw, {0, 1}}},
          [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value acc) {
            return arith::AddFOp::create(n, l, acc, v[0]);
          });
      dot = buildLoops(
          b, loc, {tokens, topK}, 1, f32, zero, {{grad, {0, 1}}, {raw, {0, 1}}},
          [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value acc) {
            return arith::AddFOp::create(
                n, l, acc, arith::MulFOp::create(n, l, v[0], v[1]));
          });
    }
    double scaling = op.getScaling().convertToDouble();
    SmallVector<Read> reads = {{grad, {0, 1}}};
    if (sum) {
      reads.push_back({sum, {0}});
      reads.push_back({dot, {0}});
    }
    Value dRaw = buildLoops(
        b, loc, {tokens, topK}, 0, f32, zero, reads,
        [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value) {
          Value g = v[0];
          if (sum) {
            Value d =
                arith::AddFOp::create(n, l, v[1], f32Constant(n, l, 1e-20));
            Value direct = arith::DivFOp::create(n, l, g, d);
            Value through = arith::DivFOp::create(
                n, l, v[2], arith::MulFOp::create(n, l, d, d));
            g = arith::SubFOp::create(n, l, direct, through);
          }
          return arith::MulFOp::create(n, l, g, f32Constant(n, l, scaling));
        });
    Value result = buildLoops(
        b, loc, {tokens, numExperts, topK}, 1, f32, zero,
        {{experts, {0, 2}}, {dRaw, {0, 2}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value acc) {
          Value picked = arith::CmpIOp::create(n, l, arith::CmpIPredicate::eq,
                                               v[0], toI32(n, l, i[1]));
          return arith::AddFOp::create(
              n, l, acc,
              arith::SelectOp::create(n, l, picked, v[1],
                                      f32Constant(n, l, 0.0)));
        });
    b.replaceOp(op, result);
    return success();
  }
};

struct MoeAssignLowering : public OpRewritePattern<MoeAssignOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MoeAssignOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(op.getExperts().getType()).getShape();
    int64_t tokens = shape[0], topK = shape[1], choices = tokens * topK;
    int64_t numExperts = op.getNumExperts(), capacity = op.getCapacity();
    bool byWeight = op.getPolicy() == DropPolicy::probs;
    Type i32 = b.getI32Type();
    TypedAttr zero = b.getI32IntegerAttr(0);
    Value experts = reshapeTensor(b, loc, op.getExperts(), {choices});
    Value weights = reshapeTensor(b, loc, op.getWeights(), {choices});

    // A choice's place in its expert's queue: the choices of the same
    // expert that come first (larger weight, or earlier token).
    Value place = buildLoops(
        b, loc, {choices, choices}, 1, i32, zero,
        {{experts, {0}}, {experts, {1}}, {weights, {0}}, {weights, {1}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value acc) {
          Value same = arith::CmpIOp::create(n, l, arith::CmpIPredicate::eq,
                                             v[1], v[0]);
          Value first =
              byWeight ? ranksBefore(n, l, v[3], i[1], v[2], i[0])
                       : arith::CmpIOp::create(n, l, arith::CmpIPredicate::slt,
                                               i[1], i[0])
                             .getResult();
          return countIf(n, l, acc, arith::AndIOp::create(n, l, same, first),
                         i32Constant(n, l, 1));
        });
    Value positions = buildLoops(
        b, loc, {choices}, 0, i32, zero, {{place, {0}}, {experts, {0}}},
        [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value) {
          Value kept = arith::CmpIOp::create(n, l, arith::CmpIPredicate::slt,
                                             v[0], i32Constant(n, l, capacity));
          Value slot = arith::AddIOp::create(
              n, l,
              arith::MulIOp::create(n, l, v[1], i32Constant(n, l, capacity)),
              v[0]);
          return arith::SelectOp::create(n, l, kept, slot,
                                         i32Constant(n, l, -1));
        });
    // Each slot's choice plus one (0: empty), from the choices' slots.
    int64_t slots = numExperts * capacity;
    Value slotPlusOne = buildLoops(
        b, loc, {slots, choices}, 1, i32, zero, {{positions, {1}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value acc) {
          Value here = arith::CmpIOp::create(n, l, arith::CmpIPredicate::eq,
                                             v[0], toI32(n, l, i[0]));
          Value choice = toI32(
              n, l, arith::AddIOp::create(n, l, i[1], indexConstant(n, l, 1)));
          return countIf(n, l, acc, here, choice);
        });
    auto fromSlot = [&](bool token) {
      return buildLoops(
          b, loc, {slots}, 0, i32, zero, {{slotPlusOne, {0}}},
          [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value) {
            Value choice =
                arith::SubIOp::create(n, l, v[0], i32Constant(n, l, 1));
            if (!token)
              return choice;
            Value filled = arith::CmpIOp::create(
                n, l, arith::CmpIPredicate::sge, choice, i32Constant(n, l, 0));
            return arith::SelectOp::create(
                       n, l, filled,
                       arith::DivSIOp::create(n, l, choice,
                                              i32Constant(n, l, topK)),
                       i32Constant(n, l, -1))
                .getResult();
          });
    };
    Value slotTokens = fromSlot(true), slotChoices = fromSlot(false);
    Value load = buildLoops(
        b, loc, {numExperts, choices}, 1, i32, zero, {{experts, {1}}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value acc) {
          Value mine = arith::CmpIOp::create(n, l, arith::CmpIPredicate::eq,
                                             v[0], toI32(n, l, i[0]));
          return countIf(n, l, acc, mine, i32Constant(n, l, 1));
        });
    Value dropped = buildLoops(
        b, loc, {choices}, 1, i32, zero, {{positions, {0}}},
        [&](OpBuilder &n, Location l, ValueRange, ValueRange v, Value acc) {
          Value lost = arith::CmpIOp::create(n, l, arith::CmpIPredicate::slt,
                                             v[0], i32Constant(n, l, 0));
          return countIf(n, l, acc, lost, i32Constant(n, l, 1));
        });
    b.replaceOp(op, {reshapeTensor(b, loc, slotTokens, {numExperts, capacity}),
                     reshapeTensor(b, loc, slotChoices, {numExperts, capacity}),
                     reshapeTensor(b, loc, positions, {tokens, topK}), load,
                     dropped});
    return success();
  }
};

struct GatherRowsLowering : public OpRewritePattern<GatherRowsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherRowsOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value source = op.getSource(), index = op.getIndex();
    auto sourceType = cast<RankedTensorType>(source.getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    int64_t rows = sourceType.getDimSize(0);
    int64_t rank = resultType.getRank();
    Type element = sourceType.getElementType();
    SmallVector<int64_t> indexDims;
    for (int64_t d = 0; d + 1 < rank; ++d)
      indexDims.push_back(d);
    Value result = buildLoops(
        b, loc, resultType.getShape(), 0, element, b.getZeroAttr(element),
        {{index, indexDims}},
        [&](OpBuilder &n, Location l, ValueRange i, ValueRange v, Value) {
          Value id = v[0];
          Value inRange = arith::AndIOp::create(
              n, l,
              arith::CmpIOp::create(n, l, arith::CmpIPredicate::sge, id,
                                    i32Constant(n, l, 0)),
              arith::CmpIOp::create(n, l, arith::CmpIPredicate::slt, id,
                                    i32Constant(n, l, rows)));
          Value row = extract(n, l, source,
                              {clampedIndex(n, l, id, rows), i[rank - 1]});
          return arith::SelectOp::create(
              n, l, inRange, row,
              arith::ConstantOp::create(n, l, element, n.getZeroAttr(element)));
        });
    b.replaceOp(op, result);
    return success();
  }
};

} // namespace

/// Outside a training step a routing-bias update does nothing (meg-optimizer
/// carries out the training step's own).
struct ExpertBiasUpdateLowering
    : public OpRewritePattern<ExpertBiasUpdateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ExpertBiasUpdateOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

void mlir::meg::populateMoePatterns(RewritePatternSet &patterns) {
  patterns.add<ExpertBiasUpdateLowering, MoeRouteLowering,
               MoeRouteGradLowering, MoeAssignLowering,
               GatherRowsLowering>(patterns.getContext());
}
