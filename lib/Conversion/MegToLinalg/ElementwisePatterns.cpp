//===- ElementwisePatterns.cpp - elementwise meg ops to linalg ---------===//
//
// Arithmetic with broadcasting, unary math, activations, casts, adaLN
// modulation, iota and broadcast, each as one linalg.generic.
//
//===----------------------------------------------------------------------===//

#include "LinalgBuilder.h"
#include "Patterns.h"

using namespace mlir;
using namespace mlir::meg;

namespace {

RankedTensorType resultTensor(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType());
}

/// Rewrites `op` as an elementwise generic over its operands.
template <typename OpTy>
struct ElementwiseLowering : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value result = buildElementwise(
        rewriter, op.getLoc(), resultTensor(op), op->getOperands(),
        [&](OpBuilder &b, Location loc, ValueRange args) {
          return scalar(op, b, loc, args);
        });
    rewriter.replaceOp(op, result);
    return success();
  }

  /// The scalar computation; specialised per op below.
  static Value scalar(OpTy op, OpBuilder &b, Location loc, ValueRange args);
};

bool isFloat(Value v) { return isa<FloatType>(v.getType()); }

template <>
Value ElementwiseLowering<AddOp>::scalar(AddOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  if (isFloat(a[0]))
    return arith::AddFOp::create(b, loc, a[0], a[1]);
  return arith::AddIOp::create(b, loc, a[0], a[1]);
}
template <>
Value ElementwiseLowering<SubOp>::scalar(SubOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  if (isFloat(a[0]))
    return arith::SubFOp::create(b, loc, a[0], a[1]);
  return arith::SubIOp::create(b, loc, a[0], a[1]);
}
template <>
Value ElementwiseLowering<MulOp>::scalar(MulOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  if (isFloat(a[0]))
    return arith::MulFOp::create(b, loc, a[0], a[1]);
  return arith::MulIOp::create(b, loc, a[0], a[1]);
}
template <>
Value ElementwiseLowering<DivOp>::scalar(DivOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  if (isFloat(a[0]))
    return arith::DivFOp::create(b, loc, a[0], a[1]);
  return arith::DivSIOp::create(b, loc, a[0], a[1]);
}
template <>
Value ElementwiseLowering<MaxOp>::scalar(MaxOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  if (isFloat(a[0]))
    return arith::MaximumFOp::create(b, loc, a[0], a[1]);
  return arith::MaxSIOp::create(b, loc, a[0], a[1]);
}
template <>
Value ElementwiseLowering<NegOp>::scalar(NegOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  return arith::NegFOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<ExpOp>::scalar(ExpOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  return math::ExpOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<LogOp>::scalar(LogOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  return math::LogOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<CosOp>::scalar(CosOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  return math::CosOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<SinOp>::scalar(SinOp, OpBuilder &b, Location loc,
                                         ValueRange a) {
  return math::SinOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<SqrtOp>::scalar(SqrtOp, OpBuilder &b, Location loc,
                                          ValueRange a) {
  return math::SqrtOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<RsqrtOp>::scalar(RsqrtOp, OpBuilder &b,
                                           Location loc, ValueRange a) {
  return math::RsqrtOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<TanhOp>::scalar(TanhOp, OpBuilder &b, Location loc,
                                          ValueRange a) {
  return math::TanhOp::create(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<SigmoidOp>::scalar(SigmoidOp, OpBuilder &b,
                                             Location loc, ValueRange a) {
  return sigmoid(b, loc, a[0]);
}
template <>
Value ElementwiseLowering<SiluOp>::scalar(SiluOp, OpBuilder &b, Location loc,
                                          ValueRange a) {
  return arith::MulFOp::create(b, loc, a[0], sigmoid(b, loc, a[0]));
}
template <>
Value ElementwiseLowering<SwigluOp>::scalar(SwigluOp, OpBuilder &b,
                                            Location loc, ValueRange a) {
  Value silu = arith::MulFOp::create(b, loc, a[0], sigmoid(b, loc, a[0]));
  return arith::MulFOp::create(b, loc, silu, a[1]);
}
template <>
Value ElementwiseLowering<GeluOp>::scalar(GeluOp op, OpBuilder &b,
                                          Location loc, ValueRange a) {
  Value x = a[0];
  Type f32 = x.getType();
  auto c = [&](double v) { return floatConstant(b, loc, f32, v); };
  Value inner;
  if (op.getApproximate() == GeluApproximation::tanh) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Value x3 = arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, x, x),
                                     x);
    Value poly = arith::AddFOp::create(
        b, loc, x, arith::MulFOp::create(b, loc, c(0.044715), x3));
    inner = math::TanhOp::create(
        b, loc, arith::MulFOp::create(b, loc, c(0.7978845608028654), poly));
  } else {
    // 0.5 x (1 + erf(x / sqrt(2)))
    inner = math::ErfOp::create(
        b, loc, arith::MulFOp::create(b, loc, x, c(0.7071067811865476)));
  }
  Value half = arith::MulFOp::create(b, loc, c(0.5), x);
  return arith::MulFOp::create(b, loc, half,
                               arith::AddFOp::create(b, loc, c(1.0), inner));
}
template <>
Value ElementwiseLowering<CastOp>::scalar(CastOp op, OpBuilder &b,
                                          Location loc, ValueRange a) {
  // The generic rounds to the result type; a float to int cast truncates.
  return a[0];
}

/// x * (1 + scale) + shift, with shift/scale [B, H] read at (b, h).
struct ModulateLowering : public OpRewritePattern<ModulateOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ModulateOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *context = op.getContext();
    AffineMap rowMap = AffineMap::get(
        3, 0, {getAffineDimExpr(0, context), getAffineDimExpr(2, context)},
        context);
    AffineMap identity = rewriter.getMultiDimIdentityMap(3);
    Value result = buildMapped(
        rewriter, op.getLoc(), resultTensor(op),
        {op.getInput(), op.getShift(), op.getScale()},
        {identity, rowMap, rowMap},
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          Value one = floatConstant(b, loc, a[0].getType(), 1.0);
          Value scaled = arith::MulFOp::create(
              b, loc, a[0], arith::AddFOp::create(b, loc, one, a[2]));
          return arith::AddFOp::create(b, loc, scaled, a[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct IotaLowering : public OpRewritePattern<IotaOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(IotaOp op,
                                PatternRewriter &rewriter) const override {
    int64_t dim = op.getDim();
    Value result = buildMapped(
        rewriter, op.getLoc(), resultTensor(op), {}, {},
        [&](OpBuilder &b, Location loc, ValueRange) -> Value {
          Value index = linalg::IndexOp::create(b, loc, dim);
          return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct BroadcastLowering : public OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    Value result = buildElementwise(
        rewriter, op.getLoc(), resultTensor(op), op.getInput(),
        [](OpBuilder &, Location, ValueRange a) { return a[0]; });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::meg::populateElementwisePatterns(RewritePatternSet &patterns) {
  patterns.add<ElementwiseLowering<AddOp>, ElementwiseLowering<SubOp>,
               ElementwiseLowering<MulOp>, ElementwiseLowering<DivOp>,
               ElementwiseLowering<MaxOp>, ElementwiseLowering<NegOp>,
               ElementwiseLowering<ExpOp>, ElementwiseLowering<LogOp>,
               ElementwiseLowering<CosOp>, ElementwiseLowering<SinOp>,
               ElementwiseLowering<SqrtOp>, ElementwiseLowering<RsqrtOp>,
               ElementwiseLowering<TanhOp>, ElementwiseLowering<SigmoidOp>,
               ElementwiseLowering<SiluOp>, ElementwiseLowering<SwigluOp>,
               ElementwiseLowering<GeluOp>, ElementwiseLowering<CastOp>,
               ModulateLowering, IotaLowering, BroadcastLowering>(
      patterns.getContext());
}
