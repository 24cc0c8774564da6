//===- FuseRope.cpp - the meg-fuse-rope pass ---------------------------===//
//
// Finds `x * cos + rotate_half(x) * sin` (SEMANTICS.md section 1) in the
// forms frameworks export and replaces it with meg.rope. Matching starts at
// the add and works up through the two multiplies: the one whose operand is
// a rotate_half of some value R names R, and the other must multiply R
// itself. R is the activation or a leading-channel slice of it.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGFUSEROPE
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// True if `value` is a constant whose every element equals `expected`.
bool isSplat(Value value, double expected) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  return attr.getSplatValue<APFloat>().convertToDouble() == expected;
}

/// The value `value` negates, in any of the forms frameworks write.
Value negated(Value value) {
  Operation *op = value.getDefiningOp();
  if (auto neg = dyn_cast_or_null<NegOp>(op))
    return neg.getInput();
  if (auto mul = dyn_cast_or_null<MulOp>(op)) {
    if (isSplat(mul.getRhs(), -1.0) && typeOf(mul.getLhs()) == typeOf(value))
      return mul.getLhs();
    if (isSplat(mul.getLhs(), -1.0) && typeOf(mul.getRhs()) == typeOf(value))
      return mul.getRhs();
  }
  if (auto sub = dyn_cast_or_null<SubOp>(op))
    if (isSplat(sub.getLhs(), 0.0) && typeOf(sub.getRhs()) == typeOf(value))
      return sub.getRhs();
  return {};
}

/// The source of `value` if it is a slice along the last dimension only:
/// channels offset, offset + stride, ... (count of them) of every row.
Value lastDimSlice(Value value, int64_t offset, int64_t count,
                   int64_t stride) {
  auto slice = value.getDefiningOp<SliceOp>();
  if (!slice)
    return {};
  ArrayRef<int64_t> shape = typeOf(slice.getInput()).getShape();
  int64_t last = shape.size() - 1;
  for (int64_t d = 0; d < last; ++d)
    if (slice.getOffsets()[d] != 0 || slice.getSizes()[d] != shape[d] ||
        slice.getStrides()[d] != 1)
      return {};
  if (slice.getOffsets()[last] != offset || slice.getSizes()[last] != count ||
      slice.getStrides()[last] != stride)
    return {};
  return slice.getInput();
}

/// The result of matching rotate_half.
struct RotateHalf {
  Value input;
  bool interleaved = false;
  /// concat(x2, -x1): the rotation by the opposite angle.
  bool inverse = false;
};

/// Half-split: concat(-x2, x1) along the last axis, x1/x2 the two halves.
std::optional<RotateHalf> matchHalfSplit(Value value) {
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 ||
      static_cast<int64_t>(concat.getAxis()) != typeOf(value).getRank() - 1)
    return std::nullopt;
  int64_t half = typeOf(value).getShape().back() / 2;
  Value first = concat.getInputs()[0], second = concat.getInputs()[1];
  for (bool inverse : {false, true}) {
    Value negatedHalf = negated(inverse ? second : first);
    Value plainHalf = inverse ? first : second;
    if (!negatedHalf)
      continue;
    // forward: -x2 = -(channels half..), x1 = channels 0..half
    Value x = lastDimSlice(negatedHalf, inverse ? 0 : half, half, 1);
    if (x && x == lastDimSlice(plainHalf, inverse ? half : 0, half, 1))
      return RotateHalf{x, false, inverse};
  }
  return std::nullopt;
}

/// Interleaved: reshape(concat(reshape(-x2), reshape(x1)) on a new last
/// axis) back to [..., R], x1/x2 the even/odd channels.
std::optional<RotateHalf> matchInterleaved(Value value) {
  auto flatten = value.getDefiningOp<ReshapeOp>();
  if (!flatten)
    return std::nullopt;
  auto concat = flatten.getInput().getDefiningOp<ConcatOp>();
  int64_t rank = typeOf(value).getRank();
  if (!concat || concat.getInputs().size() != 2 ||
      static_cast<int64_t>(concat.getAxis()) != rank ||
      typeOf(concat).getRank() != rank + 1)
    return std::nullopt;
  int64_t half = typeOf(value).getShape().back() / 2;
  auto unstack = [](Value pair) -> Value {
    auto reshape = pair.getDefiningOp<ReshapeOp>();
    return reshape ? reshape.getInput() : Value();
  };
  Value first = unstack(concat.getInputs()[0]);
  Value second = unstack(concat.getInputs()[1]);
  if (!first || !second)
    return std::nullopt;
  for (bool inverse : {false, true}) {
    Value negatedHalf = negated(inverse ? second : first);
    Value plainHalf = inverse ? first : second;
    if (!negatedHalf)
      continue;
    Value x = lastDimSlice(negatedHalf, inverse ? 0 : 1, half, 2);
    if (x && x == lastDimSlice(plainHalf, inverse ? 1 : 0, half, 2))
      return RotateHalf{x, true, inverse};
  }
  return std::nullopt;
}

std::optional<RotateHalf> matchRotateHalf(Value value) {
  if (std::optional<RotateHalf> match = matchHalfSplit(value))
    return match;
  return matchInterleaved(value);
}

/// `x * cos + rotate_half(x) * sin` at an add, before the checks on shapes.
struct RopeCandidate {
  AddOp add;
  RotateHalf rotate;
  Value cos, sin;
};

std::optional<RopeCandidate> matchCandidate(AddOp add) {
  for (auto [cosTerm, sinTerm] : {std::pair{add.getLhs(), add.getRhs()},
                                  std::pair{add.getRhs(), add.getLhs()}}) {
    auto cosMul = cosTerm.getDefiningOp<MulOp>();
    auto sinMul = sinTerm.getDefiningOp<MulOp>();
    if (!cosMul || !sinMul)
      continue;
    for (auto [rotated, sin] : {std::pair{sinMul.getLhs(), sinMul.getRhs()},
                                std::pair{sinMul.getRhs(), sinMul.getLhs()}}) {
      std::optional<RotateHalf> rotate = matchRotateHalf(rotated);
      if (!rotate)
        continue;
      if (cosMul.getLhs() == rotate->input)
        return RopeCandidate{add, *rotate, cosMul.getRhs(), sin};
      if (cosMul.getRhs() == rotate->input)
        return RopeCandidate{add, *rotate, cosMul.getLhs(), sin};
    }
  }
  return std::nullopt;
}

/// The [S', R] table behind `table`, broadcast as [1, S, 1, R] (bshd) or
/// [S, 1, 1, R] (sbhd): reshapes, a leading-row slice and a rounding from
/// f32 are looked through. Null if `table` has neither shape.
Value tableRows(OpBuilder &b, Value table, RopeLayout layout, int64_t seq,
                int64_t rotaryDim) {
  SmallVector<int64_t> expected =
      layout == RopeLayout::bshd ? SmallVector<int64_t>{1, seq, 1, rotaryDim}
                                 : SmallVector<int64_t>{seq, 1, 1, rotaryDim};
  if (typeOf(table).getShape() != ArrayRef<int64_t>(expected))
    return {};
  Value rows = table;
  while (auto reshape = rows.getDefiningOp<ReshapeOp>())
    rows = reshape.getInput();
  if (typeOf(rows).getShape() != ArrayRef<int64_t>{seq, rotaryDim}) {
    b.setInsertionPointAfterValue(table);
    auto type = RankedTensorType::get({seq, rotaryDim},
                                      typeOf(table).getElementType());
    rows = ReshapeOp::create(b, table.getLoc(), type, table);
  }
  if (auto slice = rows.getDefiningOp<SliceOp>()) {
    ArrayRef<int64_t> full = typeOf(slice.getInput()).getShape();
    if (slice.getOffsets()[0] == 0 && slice.getOffsets()[1] == 0 &&
        slice.getStrides()[0] == 1 && slice.getStrides()[1] == 1 &&
        full[1] == rotaryDim)
      rows = slice.getInput();
  }
  return rows;
}

/// The f32 table `rows` was rounded from, if any.
Value unrounded(Value rows) {
  auto cast = rows.getDefiningOp<CastOp>();
  if (cast && typeOf(cast.getInput()).getElementType().isF32())
    return cast.getInput();
  return {};
}

struct MegFuseRopePass
    : public mlir::meg::impl::MegFuseRopeBase<MegFuseRopePass> {
  using MegFuseRopeBase::MegFuseRopeBase;

  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds)
      if (std::optional<RopeCandidate> candidate = matchCandidate(add))
        fuse(*candidate);
  }

  void leaveAlone(RopeCandidate &candidate, Pass::Statistic &counter,
                  const Twine &reason) {
    ++counter;
    if (remarks)
      candidate.add.emitRemark() << "RoPE not fused: " << reason;
  }

  void fuse(RopeCandidate &candidate) {
    if (candidate.rotate.inverse)
      return leaveAlone(candidate, numInverse,
                        "inverse rotation concat(x2, -x1) has no fused form");
    Value rotary = candidate.rotate.input;
    RankedTensorType rotaryType = typeOf(rotary);
    if (rotaryType.getRank() != 4 || typeOf(candidate.add) != rotaryType)
      return leaveAlone(candidate, numLayout,
                        "expected a rank-4 activation");
    int64_t rotaryDim = rotaryType.getShape().back();

    // The full activation, and the op whose result meg.rope replaces.
    Value input = lastDimSlice(rotary, 0, rotaryDim, 1);
    Operation *replaced = candidate.add;
    if (input) {
      int64_t headDim = typeOf(input).getShape().back();
      auto rejoin = dyn_cast<ConcatOp>(
          candidate.add->hasOneUse() ? *candidate.add->user_begin() : nullptr);
      if (!rejoin || rejoin.getInputs().size() != 2 ||
          rejoin.getInputs()[0] != candidate.add.getResult() ||
          rejoin.getAxis() != 3 ||
          lastDimSlice(rejoin.getInputs()[1], rotaryDim, headDim - rotaryDim,
                       1) != input)
        return leaveAlone(candidate, numNoTail,
                          "the rotated channels are not re-joined with the "
                          "pass-through tail");
      replaced = rejoin;
    } else {
      input = rotary;
    }

    OpBuilder b(candidate.add);
    ArrayRef<int64_t> shape = typeOf(input).getShape();
    std::optional<RopeLayout> layout;
    Value cos, sin;
    for (RopeLayout option : {RopeLayout::bshd, RopeLayout::sbhd}) {
      int64_t seq = shape[option == RopeLayout::bshd ? 1 : 0];
      cos = tableRows(b, candidate.cos, option, seq, rotaryDim);
      sin = tableRows(b, candidate.sin, option, seq, rotaryDim);
      if (cos && sin) {
        layout = option;
        break;
      }
    }
    if (!layout)
      return leaveAlone(candidate, numLayout,
                        "cos/sin are not broadcast as [1, S, 1, R] (bshd) or "
                        "[S, 1, 1, R] (sbhd)");
    // Round once, in the kernel, from the f32 tables when both are there.
    Value cos32 = unrounded(cos), sin32 = unrounded(sin);
    if (cos32 && sin32 && typeOf(cos32) == typeOf(sin32)) {
      cos = cos32;
      sin = sin32;
    }
    if (typeOf(cos) != typeOf(sin))
      return leaveAlone(candidate, numLayout,
                        "cos and sin tables differ in type");

    b.setInsertionPoint(replaced);
    Value fused =
        RopeOp::create(b, replaced->getLoc(), typeOf(input), input, cos, sin,
                       RopeLayoutAttr::get(b.getContext(), *layout),
                       candidate.rotate.interleaved ? b.getUnitAttr()
                                                    : UnitAttr());
    if (Attribute layer = replaced->getAttr(MegDialect::kLayerAttrName))
      fused.getDefiningOp()->setAttr(MegDialect::kLayerAttrName, layer);
    replaced->getResult(0).replaceAllUsesWith(fused);
    ++numFused;
  }
};

} // namespace
