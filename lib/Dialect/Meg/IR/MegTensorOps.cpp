//===- MegTensorOps.cpp - elementwise and data movement ops ------------===//
//
// Type inference, verification, folds and canonicalization of the
// elementwise, cast and shape ops.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"
#include "megc/Dialect/Meg/IR/TensorSizes.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::meg;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult inferBinary(std::optional<Location> loc, StringRef opName,
                                 Type lhsType, Type rhsType,
                                 SmallVectorImpl<Type> &inferred) {
  auto lhs = cast<RankedTensorType>(lhsType);
  auto rhs = cast<RankedTensorType>(rhsType);
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, opName,
                      "expects operands of one element type, got " +
                          llvm::Twine(debugString(lhs.getElementType())) +
                          " and " + debugString(rhs.getElementType()));
  auto shape = broadcastShapes(lhs.getShape(), rhs.getShape());
  if (!shape)
    return inferError(loc, opName,
                      "cannot broadcast operand shapes " +
                          formatShape(lhs.getShape()) + " and " +
                          formatShape(rhs.getShape()));
  inferred.push_back(RankedTensorType::get(*shape, lhs.getElementType()));
  return success();
}

#define MEG_BINARY_INFER(OP, NAME)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferBinary(loc, NAME, adaptor.getLhs().getType(),                  \
                       adaptor.getRhs().getType(), inferred);                  \
  }
MEG_BINARY_INFER(AddOp, "meg.add")
MEG_BINARY_INFER(SubOp, "meg.sub")
MEG_BINARY_INFER(MulOp, "meg.mul")
MEG_BINARY_INFER(DivOp, "meg.div")
MEG_BINARY_INFER(MaxOp, "meg.max")
#undef MEG_BINARY_INFER

/// True if `attr` is a splat constant equal to `value`; for floats the sign
/// of zero must match too (x + -0.0 is x for every x, x + +0.0 is not when
/// x is -0.0).
static bool isSplatOf(Attribute attr, double value) {
  auto splat = dyn_cast_if_present<SplatElementsAttr>(attr);
  if (!splat)
    return false;
  Type element = splat.getElementType();
  if (isa<FloatType>(element)) {
    APFloat splatValue = splat.getSplatValue<APFloat>();
    return splatValue.convertToDouble() == value &&
           splatValue.isNegative() == std::signbit(value);
  }
  if (isa<IntegerType>(element))
    return splat.getSplatValue<APInt>().getSExtValue() ==
           static_cast<int64_t>(value);
  return false;
}

/// `x op c` folds to `x` when c is the identity and no broadcast happens.
static OpFoldResult foldRightIdentity(Value lhs, Attribute rhs, Type result,
                                      double identity) {
  if (lhs.getType() == result && isSplatOf(rhs, identity))
    return lhs;
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  // Integer zero has no sign; -0.0 is the float identity of addition.
  bool isFloat = isa<FloatType>(getElementTypeOrSelf(getType()));
  double zero = isFloat ? -0.0 : 0.0;
  if (OpFoldResult r = foldRightIdentity(getLhs(), adaptor.getRhs(),
                                         getType(), zero))
    return r;
  return foldRightIdentity(getRhs(), adaptor.getLhs(), getType(), zero);
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 0.0);
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult r = foldRightIdentity(getLhs(), adaptor.getRhs(),
                                         getType(), 1.0))
    return r;
  return foldRightIdentity(getRhs(), adaptor.getLhs(), getType(), 1.0);
}

namespace {
/// silu(gate) * up, the silu used nowhere else, is one swiglu: the gated
/// activation is computed in one pass and rounded once, and its gradient
/// (meg.swiglu_grad) needs gate and up only, not silu(gate) kept from the
/// forward.
struct SiluTimesUpIsSwiglu : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [silu, up] : {std::pair(op.getLhs(), op.getRhs()),
                            std::pair(op.getRhs(), op.getLhs())}) {
      auto activation = silu.getDefiningOp<SiluOp>();
      if (!activation || !silu.hasOneUse() || silu.getType() != op.getType() ||
          up.getType() != op.getType())
        continue;
      // The product's records (its layer, its pipeline pass) stay.
      DictionaryAttr records = op->getDiscardableAttrDictionary();
      auto swiglu =
          rewriter.replaceOpWithNewOp<SwigluOp>(op, activation.getInput(), up);
      swiglu->setDiscardableAttrs(records);
      rewriter.eraseOp(activation);
      return success();
    }
    return failure();
  }
};
} // namespace

void MulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<SiluTimesUpIsSwiglu>(context);
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 1.0);
}

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

namespace {
/// cast(cast(x : A -> B) -> C) becomes cast(x : A -> C) when A -> B is exact,
/// since the intermediate rounding then changes nothing.
struct FoldExactCastChain : public OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<CastOp>();
    if (!inner)
      return failure();
    Type from = getElementTypeOrSelf(inner.getInput().getType());
    Type middle = getElementTypeOrSelf(inner.getType());
    if (!isExactFloatWidening(from, middle))
      return failure();
    if (inner.getInput().getType() == op.getType()) {
      rewriter.replaceOp(op, inner.getInput());
      return success();
    }
    DictionaryAttr records = op->getDiscardableAttrDictionary();
    auto cast =
        rewriter.replaceOpWithNewOp<CastOp>(op, op.getType(), inner.getInput());
    cast->setDiscardableAttrs(records);
    return success();
  }
};
} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<FoldExactCastChain>(context);
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getType());
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "changes the element type from "
                         << input.getElementType() << " to "
                         << result.getElementType() << "; use meg.cast";
  std::optional<uint64_t> from = checkedElements(input.getShape());
  std::optional<uint64_t> to = checkedElements(result.getShape());
  auto count = [](std::optional<uint64_t> elements) {
    return elements ? std::to_string(*elements)
                    : std::string("more than 2^64");
  };
  if (!from || !to || *from != *to)
    return emitOpError() << "reshapes " << formatShape(input.getShape())
                         << " (" << count(from) << " elements) to "
                         << formatShape(result.getShape()) << " ("
                         << count(to) << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return inferError(loc, "meg.transpose",
                      "expects a permutation of " + Twine(input.getRank()) +
                          " dimensions, got " + Twine(perm.size()));
  SmallVector<bool> used(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t dim : perm) {
    if (dim < 0 || dim >= input.getRank() || used[dim])
      return inferError(loc, "meg.transpose",
                        formatShape(perm) + " is not a permutation of [0, " +
                            Twine(input.getRank()) + ")");
    used[dim] = true;
    shape.push_back(input.getDimSize(dim));
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  auto isIdentity = [](ArrayRef<int64_t> p) {
    for (auto [index, dim] : llvm::enumerate(p))
      if (dim != static_cast<int64_t>(index))
        return false;
    return true;
  };
  if (isIdentity(perm))
    return getInput();
  auto inner = getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return {};
  SmallVector<int64_t> composed;
  for (int64_t dim : perm)
    composed.push_back(inner.getPermutation()[dim]);
  if (isIdentity(composed))
    return inner.getInput();
  getInputMutable().assign(inner.getInput());
  setPermutation(composed);
  return getResult();
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> offsets = adaptor.getOffsets();
  ArrayRef<int64_t> sizes = adaptor.getSizes();
  ArrayRef<int64_t> strides = adaptor.getStrides();
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return inferError(loc, "meg.slice",
                      "expects " + Twine(rank) +
                          " offsets, sizes and strides for a rank-" +
                          Twine(rank) + " input, got " +
                          Twine(offsets.size()) + ", " + Twine(sizes.size()) +
                          " and " + Twine(strides.size()));
  for (int64_t d = 0; d < rank; ++d) {
    if (offsets[d] < 0 || sizes[d] < 1 || strides[d] < 1)
      return inferError(loc, "meg.slice",
                        "expects offset >= 0, size >= 1 and stride >= 1 in "
                        "dim " +
                            Twine(d) + ", got " + Twine(offsets[d]) + ", " +
                            Twine(sizes[d]) + " and " + Twine(strides[d]));
    // The last index read, offset + (size - 1) * stride, checked: a stride
    // of 2^60 must not wrap around into the dimension.
    std::optional<int64_t> span =
        llvm::checkedMul<int64_t>(sizes[d] - 1, strides[d]);
    std::optional<int64_t> last =
        span ? llvm::checkedAdd<int64_t>(offsets[d], *span) : std::nullopt;
    if (!last || *last >= input.getDimSize(d)) {
      std::string index =
          last ? std::to_string(*last)
               : std::to_string(offsets[d]) + " + " +
                     std::to_string(sizes[d] - 1) + " * " +
                     std::to_string(strides[d]) + " (beyond 2^63)";
      return inferError(loc, "meg.slice",
                        "reads index " + index + " of dim " + Twine(d) +
                            ", which has size " + Twine(input.getDimSize(d)));
    }
  }
  inferred.push_back(RankedTensorType::get(sizes, input.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// ConcatOp, SplitOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return inferError(loc, "meg.concat", "expects at least one input");
  auto first = cast<RankedTensorType>(inputs.front().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return inferError(loc, "meg.concat",
                      "axis " + Twine(axis) + " is out of range for rank " +
                          Twine(first.getRank()));
  SmallVector<int64_t> shape(first.getShape());
  for (auto [index, value] : llvm::enumerate(inputs.drop_front())) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() != first.getElementType())
      return inferError(loc, "meg.concat",
                        "input " + Twine(index + 1) + " has element type " +
                            debugString(type.getElementType()) +
                            ", input 0 has " +
                            debugString(first.getElementType()));
    if (type.getRank() != first.getRank())
      return inferError(loc, "meg.concat",
                        "input " + Twine(index + 1) + " has rank " +
                            Twine(type.getRank()) + ", input 0 has rank " +
                            Twine(first.getRank()));
    for (int64_t d = 0; d < first.getRank(); ++d) {
      if (d == axis)
        continue;
      if (type.getDimSize(d) != first.getDimSize(d))
        return inferError(loc, "meg.concat",
                          "input " + Twine(index + 1) + " has shape " +
                              formatShape(type.getShape()) +
                              ", which differs from input 0 " +
                              formatShape(first.getShape()) +
                              " outside axis " + Twine(axis));
    }
    shape[axis] += type.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  return {};
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= input.getRank())
    return inferError(loc, "meg.split",
                      "axis " + Twine(axis) + " is out of range for rank " +
                          Twine(input.getRank()));
  ArrayRef<int64_t> sizes = adaptor.getSizes();
  if (sizes.empty())
    return inferError(loc, "meg.split", "expects at least one piece size");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 1)
      return inferError(loc, "meg.split",
                        "expects piece sizes >= 1, got " + Twine(size));
    total += size;
  }
  if (total != input.getDimSize(axis))
    return inferError(loc, "meg.split",
                      "piece sizes " + formatShape(sizes) + " add up to " +
                          Twine(total) + " but axis " + Twine(axis) +
                          " has size " + Twine(input.getDimSize(axis)));
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(input.getShape());
    shape[axis] = size;
    inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// IotaOp, BroadcastOp, ReduceOp
//===----------------------------------------------------------------------===//

LogicalResult IotaOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  int64_t dim = getDim();
  if (dim < 0 || dim >= type.getRank())
    return emitOpError() << "counts along dim " << dim
                         << " of a rank-" << type.getRank() << " result";
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getType());
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "changes the element type from "
                         << input.getElementType() << " to "
                         << result.getElementType();
  if (!broadcastsTo(input.getShape(), result.getShape()))
    return emitOpError() << "cannot broadcast " << formatShape(input.getShape())
                         << " to " << formatShape(result.getShape());
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (dims.empty())
    return inferError(loc, "meg.reduce", "expects at least one dim");
  for (auto [index, dim] : llvm::enumerate(dims)) {
    if (dim < 0 || dim >= input.getRank())
      return inferError(loc, "meg.reduce",
                        "dim " + Twine(dim) + " is out of range for rank " +
                            Twine(input.getRank()));
    if (index > 0 && dims[index - 1] >= dim)
      return inferError(loc, "meg.reduce",
                        "expects distinct, increasing dims, got " +
                            formatShape(dims));
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (!llvm::is_contained(dims, d))
      shape.push_back(input.getDimSize(d));
    else if (adaptor.getKeepDims())
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}
