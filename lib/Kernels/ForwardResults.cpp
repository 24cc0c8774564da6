//===- ForwardResults.cpp - results computed in their out-parameters ---===//
//
// meg-forward-results: a temporary whose only fate is a final copy into an
// out-parameter is replaced by the out-parameter.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

namespace megc {
#define GEN_PASS_DEF_MEGFORWARDRESULTS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// The copy's source and target, for linalg.copy and memref.copy.
std::optional<std::pair<Value, Value>> copied(Operation *op) {
  if (auto copy = dyn_cast<linalg::CopyOp>(op);
      copy && copy.hasPureBufferSemantics())
    return std::make_pair(copy.getInputs()[0], copy.getOutputs()[0]);
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return std::make_pair(copy.getSource(), copy.getTarget());
  return std::nullopt;
}

struct MegForwardResultsPass
    : public impl::MegForwardResultsBase<MegForwardResultsPass> {
  void runOnOperation() override {
    for (auto kernel : getOperation().getOps<func::FuncOp>()) {
      Block &body = kernel.getBody().front();
      for (Operation &op : llvm::make_early_inc_range(body)) {
        std::optional<std::pair<Value, Value>> copy = copied(&op);
        if (!copy)
          continue;
        auto [source, target] = *copy;
        auto alloc = source.getDefiningOp<memref::AllocOp>();
        auto out = dyn_cast<BlockArgument>(target);
        if (!alloc || !out || out.getOwner() != &body ||
            alloc.getType() != out.getType() || !out.hasOneUse())
          continue;
        // Nothing may read the temporary after the copy.
        bool usedAfter = llvm::any_of(alloc->getUsers(), [&](Operation *user) {
          Operation *top = body.findAncestorOpInBlock(*user);
          return top && top != &op && op.isBeforeInBlock(top);
        });
        if (usedAfter)
          continue;
        op.erase();
        alloc.getResult().replaceAllUsesWith(out);
        alloc.erase();
      }
    }
  }
};

} // namespace
} // namespace megc
