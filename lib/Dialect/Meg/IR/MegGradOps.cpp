//===- MegGradOps.cpp - backward ops -----------------------------------===//
//
// Verification and type inference of the backward ops; each reuses the
// operand checks of its forward op.
//
//===----------------------------------------------------------------------===//

#include "SharedVerifiers.h"
#include "ShapeUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::meg;

LogicalResult SliceGradOp::verify() {
  auto grad = cast<RankedTensorType>(getGrad().getType());
  auto result = cast<RankedTensorType>(getType());
  int64_t rank = result.getRank();
  if (grad.getRank() != rank || grad.getElementType() != result.getElementType())
    return emitOpError() << "expects a gradient of rank " << rank
                         << " and element type " << result.getElementType()
                         << ", got " << grad;
  ArrayRef<int64_t> offsets = getOffsets(), strides = getStrides();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOpError() << "expects " << rank << " offsets and strides";
  for (int64_t d = 0; d < rank; ++d) {
    if (offsets[d] < 0 || strides[d] < 1)
      return emitOpError() << "expects offset >= 0 and stride >= 1 in dim "
                           << d;
    int64_t last = offsets[d] + (grad.getDimSize(d) - 1) * strides[d];
    if (last >= result.getDimSize(d))
      return emitOpError() << "writes index " << last << " of dim " << d
                           << ", which has size " << result.getDimSize(d);
  }
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto grad = cast<RankedTensorType>(getGrad().getType());
  auto ids = cast<RankedTensorType>(getIds().getType());
  auto table = cast<RankedTensorType>(getType());
  if (table.getRank() != 2)
    return emitOpError() << "expects a rank-2 [vocab, hidden] result, got "
                         << formatShape(table.getShape());
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(table.getDimSize(1));
  if (grad.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "expects a gradient of shape "
                         << formatShape(expected) << ", got "
                         << formatShape(grad.getShape());
  if (grad.getElementType() != table.getElementType())
    return emitOpError() << "expects the result element type "
                         << table.getElementType() << " to match the gradient's "
                         << grad.getElementType();
  return success();
}

LogicalResult VocabShardStatsGradOp::verify() {
  return verifyVocabShardOperands(*this, getLogits(), getMax(), getLabels());
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(verifyEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyNormWeight(*this, "weight", getInput(), getWeight());
}

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (!(adaptor.getEps().convertToDouble() > 0.0))
    return inferError(loc, "meg.layer_norm_grad", "expects eps > 0");
  inferred.push_back(adaptor.getInput().getType());
  if (Value weight = adaptor.getWeight()) {
    auto input = cast<RankedTensorType>(adaptor.getInput().getType());
    auto weightType = cast<RankedTensorType>(weight.getType());
    if (input.getRank() < 1 ||
        weightType.getShape() != input.getShape().take_back())
      return inferError(loc, "meg.layer_norm_grad",
                        "expects weight of shape " +
                            formatShape(input.getShape().take_back()) +
                            ", got " + formatShape(weightType.getShape()));
    inferred.push_back(weightType);
    inferred.push_back(weightType);
  }
  return success();
}

LogicalResult RopeGradOp::verify() {
  return verifyRopeOperands(*this, getGrad(), getCos(), getSin(), getLayout());
}

LogicalResult AttentionGradOp::verify() {
  SmallVector<Type> inferred;
  if (failed(inferAttentionType(getLoc(), "meg.attention_grad",
                                getQuery().getType(), getKey().getType(),
                                getValue().getType(), inferred)) ||
      failed(verifyAttentionPositions(getLoc(), "meg.attention_grad",
                                      getPositions(), getQuery().getType(),
                                      getCausal())))
    return failure();
  if (inferred.front() != getGrad().getType())
    return emitOpError() << "expects an output gradient of type "
                         << inferred.front() << ", got " << getGrad().getType();
  if (Value stats = getStats()) {
    RankedTensorType expected =
        attentionStatsType(cast<RankedTensorType>(getQuery().getType()));
    if (stats.getType() != expected)
      return emitOpError() << "expects softmax statistics of type " << expected
                           << " ([batch, heads, seq_q] f32), got "
                           << stats.getType();
  }
  double scale = getScale().convertToDouble();
  if (!(scale > 0.0 && scale <= std::numeric_limits<float>::max()))
    return emitOpError() << "expects a scale > 0 that f32 can hold, got "
                         << scale;
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  return verifyAxis(*this, getAxis(), getType());
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyLogitsLabels(getLoc(), "meg.cross_entropy_grad",
                            getLogits().getType(), getLabels().getType(),
                            getReduction(), getIgnoreIndex());
}
