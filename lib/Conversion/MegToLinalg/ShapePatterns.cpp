//===- ShapePatterns.cpp - data movement and reductions to tensor/linalg ===//
//
// reshape, copy_to_group, transpose, strided slice, concat, split and
// reduce.
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

struct ReshapeLowering : public OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reshapeTensor(rewriter, op.getLoc(), op.getInput(),
                                         tensorOf(op.getResult()).getShape()));
    return success();
  }
};

// Identities whose meaning was for autodiff (the gradient's all-reduce,
// no gradient).
template <typename Op> struct IdentityLowering : public OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

struct TransposeLowering : public OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    Value init = emptyTensor(rewriter, op.getLoc(), tensorOf(op.getResult()));
    auto transpose = linalg::TransposeOp::create(
        rewriter, op.getLoc(), op.getInput(), init, op.getPermutation());
    rewriter.replaceOp(op, transpose.getResult());
    return success();
  }
};

struct SliceLowering : public OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, tensorOf(op.getResult()), op.getInput(), ValueRange{},
        ValueRange{}, ValueRange{}, op.getOffsets(), op.getSizes(),
        op.getStrides());
    return success();
  }
};

/// The slice's elements written into zeros.
struct SliceGradLowering : public OpRewritePattern<SliceGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceGradOp op,
                                PatternRewriter &rewriter) const override {
    Value zeros =
        filledTensor(rewriter, op.getLoc(), tensorOf(op.getResult()), 0.0);
    rewriter.replaceOpWithNewOp<tensor::InsertSliceOp>(
        op, op.getGrad(), zeros, ValueRange{}, ValueRange{}, ValueRange{},
        op.getOffsets(), tensorOf(op.getGrad()).getShape(), op.getStrides());
    return success();
  }
};

struct ConcatLowering : public OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType resultType = tensorOf(op.getResult());
    Value result = emptyTensor(rewriter, op.getLoc(), resultType);
    int64_t axis = op.getAxis(), offset = 0;
    for (Value input : op.getInputs()) {
      RankedTensorType type = tensorOf(input);
      SmallVector<int64_t> offsets(type.getRank(), 0);
      SmallVector<int64_t> strides(type.getRank(), 1);
      offsets[axis] = offset;
      result = tensor::InsertSliceOp::create(
          rewriter, op.getLoc(), input, result, ValueRange{}, ValueRange{},
          ValueRange{}, offsets, type.getShape(), strides);
      offset += type.getDimSize(axis);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SplitLowering : public OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> pieces;
    int64_t axis = op.getAxis(), offset = 0;
    for (Value result : op.getResults()) {
      RankedTensorType type = tensorOf(result);
      SmallVector<int64_t> offsets(type.getRank(), 0);
      SmallVector<int64_t> strides(type.getRank(), 1);
      offsets[axis] = offset;
      pieces.push_back(tensor::ExtractSliceOp::create(
          rewriter, op.getLoc(), type, op.getInput(), ValueRange{},
          ValueRange{}, ValueRange{}, offsets, type.getShape(), strides));
      offset += type.getDimSize(axis);
    }
    rewriter.replaceOp(op, pieces);
    return success();
  }
};

struct ReduceLowering : public OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = tensorOf(op.getInput());
    ArrayRef<int64_t> dims = op.getDims();
    Combine combine =
        op.getKind() == ReduceKind::max ? Combine::Max : Combine::Sum;
    Value reduced =
        buildReduction(rewriter, loc, op.getInput(), dims, combine);
    int64_t count = 1;
    for (int64_t d : dims)
      count *= inputType.getDimSize(d);
    RankedTensorType resultType = tensorOf(op.getResult());
    auto dropped = RankedTensorType::get(
        tensorOf(reduced).getShape(), resultType.getElementType());
    bool mean = op.getKind() == ReduceKind::mean;
    Value result = buildElementwise(
        rewriter, loc, dropped, reduced,
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          if (!mean)
            return a[0];
          return arith::DivFOp::create(
              b, l, a[0], floatConstant(b, l, a[0].getType(), count));
        });
    if (op.getKeepDims())
      result = reshapeTensor(rewriter, loc, result, resultType.getShape());
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::meg::populateShapePatterns(RewritePatternSet &patterns) {
  patterns.add<ReshapeLowering, IdentityLowering<CopyToGroupOp>,
               IdentityLowering<StopGradientOp>,
               IdentityLowering<DataSumOp>, TransposeLowering,
               SliceLowering,
               SliceGradLowering,
               ConcatLowering, SplitLowering, ReduceLowering>(
      patterns.getContext());
}
