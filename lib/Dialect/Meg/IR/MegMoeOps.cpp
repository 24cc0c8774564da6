//===- MegMoeOps.cpp - mixture-of-experts routing and dispatch ---------===//
//
// Verification and vector-Jacobian products of the router, the capacity
// assignment and the row gathers of a mixture-of-experts layer.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"
#include "VJPUtils.h"

#include <limits>
#include <cmath>

using namespace mlir;
using namespace mlir::meg;

using Grads = FailureOr<SmallVector<Value>>;

/// Checks that `value` has exactly `shape`, naming it `what`.
static LogicalResult expectShape(Operation *op, StringRef what, Value value,
                                 ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> actual = tensorTypeOf(value).getShape();
  if (actual == shape)
    return success();
  return op->emitOpError() << "expects " << what << " of shape "
                           << formatShape(shape) << ", got "
                           << formatShape(actual);
}

//===----------------------------------------------------------------------===//
// MoeRouteOp
//===----------------------------------------------------------------------===//

LogicalResult MoeRouteOp::verify() {
  RankedTensorType scores = tensorTypeOf(getScores());
  if (scores.getRank() != 2)
    return emitOpError() << "expects rank-2 [tokens, experts] scores, got "
                         << formatShape(scores.getShape());
  int64_t tokens = scores.getDimSize(0), experts = scores.getDimSize(1);
  if (failed(expectShape(*this, "bias", getBias(), {experts})))
    return failure();
  int64_t topK = getTopK(), groups = getGroups(), topGroups = getTopGroups();
  if (groups < 1 || experts % groups != 0)
    return emitOpError() << "splits " << experts << " experts into " << groups
                         << " groups, which does not divide them";
  int64_t perGroup = experts / groups;
  if (groups > 1 && perGroup < 2)
    return emitOpError() << "scores each group by its two best experts, but "
                            "groups of "
                         << perGroup << " expert have fewer";
  if (topGroups < 1 || topGroups > groups)
    return emitOpError() << "keeps " << topGroups << " of " << groups
                         << " groups; expected between 1 and " << groups;
  if (topK < 1 || topK > topGroups * perGroup)
    return emitOpError() << "takes top_k = " << topK << " experts from the "
                         << topGroups * perGroup
                         << " of the groups it keeps; expected between 1 and "
                         << topGroups * perGroup;
  double scaling = getScaling().convertToDouble();
  if (!(scaling > 0.0 && scaling <= std::numeric_limits<float>::max()))
    return emitOpError() << "expects a scaling > 0 that f32 can hold, got "
                         << scaling;
  if (failed(expectShape(*this, "experts", getExperts(), {tokens, topK})) ||
      failed(expectShape(*this, "weights", getWeights(), {tokens, topK})))
    return failure();
  return success();
}

Grads MoeRouteOp::buildVJP(OpBuilder &b, ValueRange grads) {
  Value scores;
  if (grads[1])
    scores = MoeRouteGradOp::create(b, getLoc(), getScores().getType(),
                                    grads[1], getScores(), getExperts(),
                                    getNormalize(), getScaling());
  return SmallVector<Value>{scores, Value()};
}

LogicalResult MoeRouteGradOp::verify() {
  RankedTensorType experts = tensorTypeOf(getExperts());
  RankedTensorType scores = tensorTypeOf(getScores());
  if (experts.getRank() != 2 || scores.getRank() != 2 ||
      experts.getDimSize(0) != scores.getDimSize(0))
    return emitOpError() << "expects [tokens, top_k] experts and [tokens, "
                            "experts] scores, got "
                         << formatShape(experts.getShape()) << " and "
                         << formatShape(scores.getShape());
  if (failed(expectShape(*this, "weights_grad", getWeightsGrad(),
                         experts.getShape())) ||
      failed(expectShape(*this, "result", getResult(), scores.getShape())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// MoeAssignOp
//===----------------------------------------------------------------------===//

LogicalResult MoeAssignOp::verify() {
  RankedTensorType experts = tensorTypeOf(getExperts());
  if (experts.getRank() != 2)
    return emitOpError() << "expects rank-2 [tokens, top_k] experts, got "
                         << formatShape(experts.getShape());
  int64_t tokens = experts.getDimSize(0), topK = experts.getDimSize(1);
  int64_t numExperts = getNumExperts(), capacity = getCapacity();
  if (numExperts < 1 || capacity < 1)
    return emitOpError() << "expects at least one expert and a capacity >= 1, "
                            "got "
                         << numExperts << " experts of capacity " << capacity;
  if (failed(expectShape(*this, "weights", getWeights(), experts.getShape())) ||
      failed(expectShape(*this, "slot_tokens", getSlotTokens(),
                         {numExperts, capacity})) ||
      failed(expectShape(*this, "slot_choices", getSlotChoices(),
                         {numExperts, capacity})) ||
      failed(expectShape(*this, "positions", getPositions(), {tokens, topK})) ||
      failed(expectShape(*this, "load", getLoad(), {numExperts})))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// GatherRowsOp
//===----------------------------------------------------------------------===//

LogicalResult GatherRowsOp::verify() {
  RankedTensorType source = tensorTypeOf(getSource());
  if (source.getRank() != 2)
    return emitOpError() << "expects a rank-2 [rows, width] source, got "
                         << formatShape(source.getShape());
  SmallVector<int64_t> expected(tensorTypeOf(getIndex()).getShape());
  expected.push_back(source.getDimSize(1));
  RankedTensorType result = tensorTypeOf(getResult());
  if (failed(expectShape(*this, "a result", getResult(), expected)))
    return failure();
  if (result.getElementType() != source.getElementType())
    return emitOpError() << "expects the source's element type "
                         << source.getElementType() << " for the result, got "
                         << result.getElementType();
  if (Value inverse = getInverse()) {
    RankedTensorType type = tensorTypeOf(inverse);
    if (type.getRank() != 2 || type.getDimSize(0) != source.getDimSize(0))
      return emitOpError() << "expects an inverse of shape [" 
                           << source.getDimSize(0)
                           << ", m] (the result rows reading each source "
                              "row), got "
                           << formatShape(type.getShape());
  }
  return success();
}

Grads GatherRowsOp::buildVJP(OpBuilder &b, ValueRange grads) {
  SmallVector<Value> result(getNumOperands());
  if (!grads[0])
    return result;
  Value inverse = getInverse();
  if (!inverse) {
    emitOpError() << "has no gradient with respect to its source without an "
                     "inverse index";
    return failure();
  }
  Location loc = getLoc();
  RankedTensorType source = tensorTypeOf(getSource());
  int64_t width = source.getDimSize(1);
  int64_t rows = tensorTypeOf(getIndex()).getNumElements();
  RankedTensorType inverseType = tensorTypeOf(inverse);
  // Each source row's gradient: the sum of the result rows that read it,
  // found through the inverse (a gather of the gradient's rows).
  Value flat = reshapeTo(b, loc, grads[0], {rows, width});
  SmallVector<int64_t> gatheredShape(inverseType.getShape());
  gatheredShape.push_back(width);
  Value gathered = GatherRowsOp::create(
      b, loc,
      RankedTensorType::get(gatheredShape, source.getElementType()), flat,
      inverse, Value());
  Value summed = ReduceOp::create(b, loc, ReduceKind::sum, gathered,
                                  ArrayRef<int64_t>{1}, false);
  result[0] = summed;
  return result;
}

//===----------------------------------------------------------------------===//
// ExpertBiasUpdateOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertBiasUpdateOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate > 0.0 && rate <= std::numeric_limits<float>::max()))
    return emitOpError() << "expects a rate > 0 that f32 can hold, got "
                         << rate;
  if (tensorTypeOf(getLoad()).getRank() != 1)
    return emitOpError() << "expects a load [E] (one count per expert), got "
                         << getLoad().getType();
  return success();
}

LogicalResult
ExpertBiasUpdateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getBiasAttr());
  if (!param)
    return emitOpError() << "updates " << getBiasAttr()
                         << ", which is not a meg.param";
  if (!param.getFrozen())
    return emitOpError() << "updates " << getBiasAttr()
                         << ", which is not frozen: a routing bias gets no "
                            "gradient, only this update";
  if (param.getType() != getLoad().getType())
    return emitOpError() << "updates " << getBiasAttr() << " of type "
                         << param.getType() << " from a load of type "
                         << getLoad().getType();
  return success();
}
