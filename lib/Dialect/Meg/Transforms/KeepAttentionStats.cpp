//===- KeepAttentionStats.cpp - the meg-keep-attention-stats pass ------===//
//
// Gives every attention gradient the softmax statistics of the forward that
// produced the output it reads, so that the backward does not recompute
// them: the forward is rebuilt with `stats` and its statistics are passed to
// the gradient.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGKEEPATTENTIONSTATS
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Whether `grad` differentiates `forward`: the same operands, mask and
/// scale.
bool differentiates(AttentionGradOp grad, AttentionOp forward) {
  return grad.getQuery() == forward.getQuery() &&
         grad.getKey() == forward.getKey() &&
         grad.getValue() == forward.getValue() &&
         grad.getPositions() == forward.getPositions() &&
         grad.getCausal() == forward.getCausal() &&
         grad.getScale() == forward.getScale();
}

/// `forward` itself when it returns its statistics, or a copy that does,
/// which replaces it.
AttentionOp withStats(AttentionOp forward) {
  if (forward.getKeepStats())
    return forward;
  OpBuilder builder(forward);
  auto kept = AttentionOp::create(
      builder, forward.getLoc(), forward.getQuery(), forward.getKey(),
      forward.getValue(), forward.getPositions(), forward.getCausalAttr(),
      forward.getScaleAttr(), builder.getUnitAttr());
  // Discardable attributes (the layer, recomputation marks) carry over.
  for (NamedAttribute attr : forward->getDiscardableAttrs())
    kept->setAttr(attr.getName(), attr.getValue());
  forward.getResult().replaceAllUsesWith(kept.getResult());
  forward.erase();
  return kept;
}

struct MegKeepAttentionStatsPass
    : public mlir::meg::impl::MegKeepAttentionStatsBase<
          MegKeepAttentionStatsPass> {
  void runOnOperation() override {
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](AttentionGradOp grad) {
      if (!grad.getStats())
        grads.push_back(grad);
    });
    for (AttentionGradOp grad : grads) {
      auto forward = grad.getOutput().getDefiningOp<AttentionOp>();
      if (!forward || !differentiates(grad, forward))
        continue;
      AttentionOp kept = withStats(forward);
      grad.getStatsMutable().assign(kept.getStats());
      ++numKept;
    }
  }
};

} // namespace
