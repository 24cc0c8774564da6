//===- OptimizerPatterns.cpp - adamw to linalg -------------------------===//
//
// One AdamW step as one elementwise generic with three outputs (parameter
// and moments), computed in f32 and stored in each tensor's own dtype: one
// pass over the state, each element read before it is written, so that the
// update can happen in the state's own buffers. A skipped update (a
// non-finite loss or gradient norm) stores the values it read. The count
// of non-finite scalars is one generic over them.
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"
#include "Patterns.h"

#include <limits>

using namespace mlir;
using namespace mlir::meg;

namespace {

struct AdamWLowering : public OpRewritePattern<AdamWOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AdamWOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AdamWAttr config = op.getConfig();
    double lr = config.getLr().convertToDouble();
    double beta1 = config.getBeta1().convertToDouble();
    double beta2 = config.getBeta2().convertToDouble();
    double eps = config.getEps().convertToDouble();
    double decay = config.getWeightDecay().convertToDouble();
    auto paramType = cast<RankedTensorType>(op.getParam().getType());
    int64_t rank = paramType.getRank();
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap scalar = AffineMap::get(rank, 0, {}, op.getContext());
    SmallVector<Value> inputs = {op.getParam(), op.getGrad(), op.getExpAvg(),
                                 op.getExpAvgSq(), op.getStep()};
    SmallVector<AffineMap> maps = {identity, identity, identity, identity,
                                   scalar};
    // a = [param, grad, exp_avg, exp_avg_sq, step, (lr), (grad_scale),
    //      (skip)]
    int lrIndex = -1, scaleIndex = -1, skipIndex = -1;
    if (op.getLr()) {
      lrIndex = inputs.size();
      inputs.push_back(op.getLr());
      maps.push_back(scalar);
    }
    if (op.getGradScale()) {
      scaleIndex = inputs.size();
      inputs.push_back(op.getGradScale());
      maps.push_back(scalar);
    }
    if (op.getSkip()) {
      skipIndex = inputs.size();
      inputs.push_back(op.getSkip());
      maps.push_back(scalar);
    }
    auto c = [](OpBuilder &b, Location l, double v) {
      return floatConstant(b, l, b.getF32Type(), v);
    };
    auto newExpAvg = [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      return arith::AddFOp::create(
          b, l, arith::MulFOp::create(b, l, c(b, l, beta1), a[2]),
          arith::MulFOp::create(b, l, c(b, l, 1 - beta1), a[1]));
    };
    auto newExpAvgSq = [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value g2 = arith::MulFOp::create(b, l, a[1], a[1]);
      return arith::AddFOp::create(
          b, l, arith::MulFOp::create(b, l, c(b, l, beta2), a[3]),
          arith::MulFOp::create(b, l, c(b, l, 1 - beta2), g2));
    };
    auto newParam = [&](OpBuilder &b, Location l, ValueRange a) -> Value {
      Value step = arith::SIToFPOp::create(b, l, b.getF32Type(), a[4]);
      auto correction = [&](double beta) -> Value {
        return arith::SubFOp::create(
            b, l, c(b, l, 1.0),
            math::PowFOp::create(b, l, c(b, l, beta), step));
      };
      Value mhat =
          arith::DivFOp::create(b, l, newExpAvg(b, l, a), correction(beta1));
      Value vhat =
          arith::DivFOp::create(b, l, newExpAvgSq(b, l, a), correction(beta2));
      Value update = arith::AddFOp::create(
          b, l,
          arith::DivFOp::create(
              b, l, mhat,
              arith::AddFOp::create(b, l, math::SqrtOp::create(b, l, vhat),
                                    c(b, l, eps))),
          arith::MulFOp::create(b, l, c(b, l, decay), a[0]));
      Value rate = lrIndex >= 0 ? a[lrIndex] : c(b, l, lr);
      return arith::SubFOp::create(b, l, a[0],
                                   arith::MulFOp::create(b, l, rate, update));
    };
    auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
    SmallVector<RankedTensorType> types = {paramType, typeOf(op.getExpAvg()),
                                           typeOf(op.getExpAvgSq())};
    SmallVector<Type> resultTypes(types.begin(), types.end());
    SmallVector<Value> inits;
    for (RankedTensorType type : types) {
      inits.push_back(emptyTensor(rewriter, loc, type));
      maps.push_back(identity);
    }
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultTypes, inputs, inits, maps,
        parallelIterators(rank),
        [&](OpBuilder &b, Location l, ValueRange args) {
          SmallVector<Value> a;
          for (Value arg : args.take_front(inputs.size()))
            a.push_back(toCompute(b, l, arg));
          Value old[] = {a[0], a[2], a[3]};
          // The clipped gradient, one rounding as clip_grad_norm_'s mul_.
          if (scaleIndex >= 0)
            a[1] = arith::MulFOp::create(b, l, a[1], a[scaleIndex]);
          Value results[] = {newParam(b, l, a), newExpAvg(b, l, a),
                             newExpAvgSq(b, l, a)};
          if (skipIndex >= 0) {
            Value apply = arith::CmpFOp::create(
                b, l, arith::CmpFPredicate::OEQ, a[skipIndex], c(b, l, 0.0));
            for (int i = 0; i < 3; ++i)
              results[i] = arith::SelectOp::create(b, l, apply, results[i],
                                                   old[i]);
          }
          SmallVector<Value> stored;
          for (auto [value, type] : llvm::zip(results, types))
            stored.push_back(convertScalar(b, l, value, type.getElementType()));
          linalg::YieldOp::create(b, l, stored);
        });
    Value param = generic.getResult(0), expAvg = generic.getResult(1),
          expAvgSq = generic.getResult(2);
    rewriter.replaceOp(op, {param, expAvg, expAvgSq});
    return success();
  }
};

/// The sum over the inputs of 1 where |x| is not below infinity (NaN, or
/// +-infinity), 0 otherwise.
struct CountNonfiniteLowering : public OpRewritePattern<CountNonfiniteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CountNonfiniteOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    SmallVector<AffineMap> maps(op.getInputs().size(),
                                AffineMap::get(0, 0, {}, op.getContext()));
    Value count = buildMapped(
        rewriter, op.getLoc(), type, op.getInputs(), maps,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Type f32 = b.getF32Type();
          Value sum = floatConstant(b, l, f32, 0.0);
          Value infinity =
              floatConstant(b, l, f32, std::numeric_limits<double>::infinity());
          for (Value x : a) {
            Value finite = arith::CmpFOp::create(
                b, l, arith::CmpFPredicate::OLT, math::AbsFOp::create(b, l, x),
                infinity);
            sum = arith::AddFOp::create(
                b, l, sum,
                arith::SelectOp::create(b, l, finite,
                                        floatConstant(b, l, f32, 0.0),
                                        floatConstant(b, l, f32, 1.0)));
          }
          return sum;
        });
    rewriter.replaceOp(op, count);
    return success();
  }
};

} // namespace

void mlir::meg::populateOptimizerPatterns(RewritePatternSet &patterns) {
  patterns.add<AdamWLowering, CountNonfiniteLowering>(patterns.getContext());
}
