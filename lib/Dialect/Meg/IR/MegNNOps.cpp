//===- MegNNOps.cpp - transformer forward ops --------------------------===//
//
// Type inference and verification of the transformer forward ops.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"

#include "llvm/Support/FormatVariadic.h"

#include <limits>
#include "SharedVerifiers.h"

using namespace mlir;
using namespace mlir::meg;

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType table = tensorType(adaptor.getTable());
  RankedTensorType ids = tensorType(adaptor.getIds());
  if (table.getRank() != 2)
    return inferError(loc, "meg.embedding",
                      "expects a rank-2 [vocab, hidden] table, got shape " +
                          formatShape(table.getShape()));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp, LinearOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType lhs = tensorType(adaptor.getLhs());
  RankedTensorType rhs = tensorType(adaptor.getRhs());
  if (lhs.getElementType() != rhs.getElementType())
    return inferError(loc, "meg.matmul",
                      "expects operands of one element type, got " +
                          debugString(lhs.getElementType()) + " and " +
                          debugString(rhs.getElementType()));
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return inferError(loc, "meg.matmul",
                      "expects operands of rank >= 2, got shapes " +
                          formatShape(lhs.getShape()) + " and " +
                          formatShape(rhs.getShape()));
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  int64_t m = l[l.size() - 2], lk = l.back();
  if (adaptor.getTransposeLhs())
    std::swap(m, lk);
  int64_t rk = r[r.size() - 2], n = r.back();
  if (adaptor.getTransposeRhs())
    std::swap(rk, n);
  if (lk != rk)
    return inferError(loc, "meg.matmul",
                      "contracts lhs " + formatShape(l) + " over K = " +
                          Twine(lk) + " with rhs " + formatShape(r) +
                          " over K = " + Twine(rk));
  ArrayRef<int64_t> lhsBatch = l.drop_back(2), rhsBatch = r.drop_back(2);
  if (!rhsBatch.empty() && lhsBatch != rhsBatch)
    return inferError(loc, "meg.matmul",
                      "expects equal batch dimensions or a rank-2 rhs, got " +
                          formatShape(lhsBatch) + " and " +
                          formatShape(rhsBatch));
  SmallVector<int64_t> shape(lhsBatch);
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = tensorType(adaptor.getInput());
  RankedTensorType weight = tensorType(adaptor.getWeight());
  if (input.getElementType() != weight.getElementType())
    return inferError(loc, "meg.linear",
                      "expects input and weight of one element type, got " +
                          debugString(input.getElementType()) + " and " +
                          debugString(weight.getElementType()));
  if (weight.getRank() != 2)
    return inferError(loc, "meg.linear",
                      "expects a rank-2 [out, in] weight, got shape " +
                          formatShape(weight.getShape()));
  if (input.getRank() < 1 || input.getShape().back() != weight.getDimSize(1))
    return inferError(loc, "meg.linear",
                      "expects the last input dim to equal the weight's in "
                      "features " +
                          Twine(weight.getDimSize(1)) + ", got input shape " +
                          formatShape(input.getShape()));
  if (Value bias = adaptor.getBias()) {
    RankedTensorType biasType = tensorType(bias);
    if (biasType.getShape() != ArrayRef<int64_t>{weight.getDimSize(0)} ||
        biasType.getElementType() != input.getElementType())
      return inferError(loc, "meg.linear",
                        "expects a bias of shape [" +
                            Twine(weight.getDimSize(0)) + "] and type " +
                            debugString(input.getElementType()) + ", got " +
                            debugString(biasType));
  }
  SmallVector<int64_t> shape(input.getShape().drop_back());
  shape.push_back(weight.getDimSize(0));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

LogicalResult mlir::meg::verifyNormWeight(Operation *op, StringRef what,
                                          Value input, Value weight) {
  RankedTensorType inputType = tensorType(input);
  RankedTensorType weightType = tensorType(weight);
  if (inputType.getRank() < 1)
    return op->emitOpError() << "expects an input of rank >= 1";
  int64_t hidden = inputType.getShape().back();
  if (weightType.getShape() != ArrayRef<int64_t>{hidden})
    return op->emitOpError() << "expects " << what << " of shape [" << hidden
                             << "] (the last input dim), got "
                             << formatShape(weightType.getShape());
  if (weightType.getElementType() != inputType.getElementType())
    return op->emitOpError() << "expects " << what << " of element type "
                             << inputType.getElementType() << ", got "
                             << weightType.getElementType();
  return success();
}

LogicalResult mlir::meg::verifyEps(Operation *op, double eps) {
  // Above 1 the epsilon outweighs the variance of normalised activations,
  // and the layer's output vanishes.
  if (!(eps > 0.0 && eps <= 1.0))
    return op->emitOpError() << "expects eps in (0, 1], got " << eps;
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyNormWeight(*this, "weight", getInput(), getWeight());
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyEps(*this, getEps().convertToDouble())))
    return failure();
  if (static_cast<bool>(getWeight()) != static_cast<bool>(getBias()))
    return emitOpError() << "expects weight and bias together (affine) or "
                            "neither, got only the "
                         << (getWeight() ? "weight" : "bias");
  if (!getWeight())
    return success();
  if (failed(verifyNormWeight(*this, "weight", getInput(), getWeight())))
    return failure();
  return verifyNormWeight(*this, "bias", getInput(), getBias());
}

//===----------------------------------------------------------------------===//
// RopeOp (shared with RopeGradOp)
//===----------------------------------------------------------------------===//

namespace mlir::meg {
LogicalResult verifyRopeOperands(Operation *op, Value input, Value cos,
                                 Value sin, RopeLayout layout) {
  RankedTensorType inputType = tensorType(input);
  RankedTensorType cosType = tensorType(cos);
  if (inputType.getRank() != 4)
    return op->emitOpError() << "expects a rank-4 " << stringifyRopeLayout(layout)
                             << " input, got shape "
                             << formatShape(inputType.getShape());
  if (cosType != tensorType(sin))
    return op->emitOpError() << "expects cos and sin of one type, got "
                             << cosType << " and " << sin.getType();
  if (cosType.getRank() != 2)
    return op->emitOpError() << "expects [seq, rotary_dim] cos/sin tables, got "
                             << "shape " << formatShape(cosType.getShape());
  int64_t seq = inputType.getDimSize(layout == RopeLayout::bshd ? 1 : 0);
  int64_t headDim = inputType.getDimSize(3);
  int64_t rotaryDim = cosType.getDimSize(1);
  if (rotaryDim % 2 != 0 || rotaryDim > headDim || rotaryDim < 2)
    return op->emitOpError() << "expects rotary dim " << rotaryDim
                             << " to be even, >= 2 and <= head dim "
                             << headDim;
  if (cosType.getDimSize(0) < seq)
    return op->emitOpError() << "has a " << cosType.getDimSize(0)
                             << "-row frequency table for sequence length "
                             << seq;
  return success();
}
} // namespace mlir::meg

LogicalResult RopeOp::verify() {
  return verifyRopeOperands(*this, getInput(), getCos(), getSin(),
                            getLayout());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

namespace mlir::meg {
LogicalResult inferAttentionType(std::optional<Location> loc,
                                 StringRef opName, Type queryType,
                                 Type keyType, Type valueType,
                                 SmallVectorImpl<Type> &inferred) {
  auto q = cast<RankedTensorType>(queryType);
  auto k = cast<RankedTensorType>(keyType);
  auto v = cast<RankedTensorType>(valueType);
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return inferError(loc, opName,
                      "expects rank-4 [batch, seq, heads, head_dim] q, k and "
                      "v, got shapes " +
                          formatShape(q.getShape()) + ", " +
                          formatShape(k.getShape()) + " and " +
                          formatShape(v.getShape()));
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return inferError(loc, opName, "expects q, k and v of one element type");
  if (q.getDimSize(0) != k.getDimSize(0) || k.getDimSize(0) != v.getDimSize(0))
    return inferError(loc, opName, "expects q, k and v of one batch size");
  if (k.getDimSize(1) != v.getDimSize(1) || k.getDimSize(2) != v.getDimSize(2))
    return inferError(loc, opName,
                      "expects k and v with the same sequence length and "
                      "head count, got " +
                          formatShape(k.getShape()) + " and " +
                          formatShape(v.getShape()));
  if (q.getDimSize(3) != k.getDimSize(3))
    return inferError(loc, opName,
                      "expects q and k of one head dim, got " +
                          Twine(q.getDimSize(3)) + " and " +
                          Twine(k.getDimSize(3)));
  int64_t heads = q.getDimSize(2), kvHeads = k.getDimSize(2);
  if (heads % kvHeads != 0)
    return inferError(loc, opName,
                      "expects the " + Twine(heads) +
                          " query heads to be a multiple of the " +
                          Twine(kvHeads) + " key/value heads");
  inferred.push_back(RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), heads, v.getDimSize(3)},
      q.getElementType()));
  return success();
}

LogicalResult verifyAttentionScale(std::optional<Location> loc,
                                   StringRef opName, double scale) {
  // The scores are computed in f32: a larger scale overflows them.
  if (!(scale > 0.0 && scale <= std::numeric_limits<float>::max()))
    return inferError(loc, opName,
                      "expects a scale > 0 that f32 can hold, got " +
                          llvm::formatv("{0:e}", scale).str());
  return success();
}

LogicalResult verifyAttentionPositions(std::optional<Location> loc,
                                       StringRef opName, Value positions,
                                       Type queryType, bool causal) {
  if (!positions)
    return success();
  if (!causal)
    return inferError(loc, opName,
                      "takes query positions only with 'causal' (they place "
                      "the causal mask)");
  auto type = cast<RankedTensorType>(positions.getType());
  int64_t seqQ = cast<RankedTensorType>(queryType).getDimSize(1);
  if (type.getRank() != 1 || type.getDimSize(0) != seqQ)
    return inferError(loc, opName,
                      "expects one position per query, [" + Twine(seqQ) +
                          "] i32, got " + formatShape(type.getShape()));
  return success();
}

RankedTensorType attentionStatsType(RankedTensorType query) {
  return RankedTensorType::get(
      {query.getDimSize(0), query.getDimSize(2), query.getDimSize(1)},
      Float32Type::get(query.getContext()));
}
} // namespace mlir::meg

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttentionScale(loc, "meg.attention",
                                  adaptor.getScale().convertToDouble())) ||
      failed(inferAttentionType(loc, "meg.attention",
                                adaptor.getQuery().getType(),
                                adaptor.getKey().getType(),
                                adaptor.getValue().getType(), inferred)) ||
      failed(verifyAttentionPositions(
          loc, "meg.attention", adaptor.getPositions(),
          adaptor.getQuery().getType(), adaptor.getCausal())))
    return failure();
  if (adaptor.getKeepStats())
    inferred.push_back(attentionStatsType(
        cast<RankedTensorType>(adaptor.getQuery().getType())));
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxOp, CrossEntropyOp, ModulateOp
//===----------------------------------------------------------------------===//

namespace mlir::meg {
LogicalResult verifyAxis(Operation *op, int64_t axis, Type type) {
  int64_t rank = cast<RankedTensorType>(type).getRank();
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for rank "
                             << rank;
  return success();
}

LogicalResult verifyLogitsLabels(std::optional<Location> loc,
                                 StringRef opName, Type logitsType,
                                 Type labelsType, ReduceKind reduction,
                                 std::optional<int64_t> ignoreIndex) {
  auto logits = cast<RankedTensorType>(logitsType);
  auto labels = cast<RankedTensorType>(labelsType);
  if (reduction == ReduceKind::max)
    return inferError(loc, opName, "expects reduction mean or sum");
  if (ignoreIndex && reduction != ReduceKind::sum)
    return inferError(loc, opName,
                      "takes an ignore index only with reduction sum: the "
                      "mean over the labels that count is the sum divided "
                      "by meg.label_count");
  if (logits.getRank() < 1)
    return inferError(loc, opName,
                      "expects logits of rank >= 1 ([..., classes]), got a "
                      "scalar");
  if (logits.getShape().drop_back() != labels.getShape())
    return inferError(loc, opName,
                      "expects labels of shape " +
                          formatShape(logits.getShape().drop_back()) +
                          " for logits " + formatShape(logits.getShape()) +
                          ", got " + formatShape(labels.getShape()));
  return success();
}
} // namespace mlir::meg

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getType());
}

LogicalResult CrossEntropyOp::verify() {
  return verifyLogitsLabels(getLoc(), "meg.cross_entropy",
                            getLogits().getType(), getLabels().getType(),
                            getReduction(), getIgnoreIndex());
}

LogicalResult mlir::meg::verifyVocabShardOperands(Operation *op, Value logits,
                                                  Value max, Value labels) {
  RankedTensorType logitsType = tensorType(logits);
  RankedTensorType maxType = tensorType(max);
  RankedTensorType labelsType = tensorType(labels);
  if (logitsType.getRank() < 1 ||
      maxType.getShape() != logitsType.getShape().drop_back() ||
      labelsType.getShape() != maxType.getShape())
    return op->emitOpError()
           << "expects max and labels of the logits' shape without its last "
              "dimension, got logits "
           << formatShape(logitsType.getShape()) << ", max "
           << formatShape(maxType.getShape()) << " and labels "
           << formatShape(labelsType.getShape());
  return success();
}

LogicalResult VocabShardStatsOp::verify() {
  if (failed(verifyVocabShardOperands(*this, getLogits(), getMax(),
                                      getLabels())))
    return failure();
  int64_t classes = tensorType(getLogits()).getShape().back();
  if (getVocab() < classes || getVocab() % classes != 0)
    return emitOpError() << "expects a vocabulary that is a multiple of the "
                         << classes << " classes of each rank, got "
                         << getVocab();
  if (std::optional<int64_t> ignore = getIgnoreIndex();
      ignore && *ignore >= 0 && *ignore < getVocab())
    return emitOpError() << "ignores label " << *ignore
                         << ", which is a class of the vocabulary of "
                         << getVocab();
  return success();
}

LogicalResult ModulateOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (input.getRank() != 3)
    return emitOpError() << "expects a rank-3 [batch, seq, hidden] input, got "
                         << formatShape(input.getShape());
  SmallVector<int64_t> expected = {input.getDimSize(0), input.getDimSize(2)};
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"shift", getShift()}, {"scale", getScale()}}) {
    RankedTensorType type = tensorType(value);
    if (type.getShape() != ArrayRef<int64_t>(expected) ||
        type.getElementType() != input.getElementType())
      return emitOpError() << "expects " << name << " of shape "
                           << formatShape(expected) << " and element type "
                           << input.getElementType() << ", got " << type;
  }
  return success();
}
