//===- PrepareKernels.cpp - one loop nest per reduction, results written -===//
//
// meg-prepare-kernels: elementwise linalg ops merged into their only
// consumer, and every kernel result a tensor some linalg op writes.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace megc {
#define GEN_PASS_DEF_MEGPREPAREKERNELS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// Kernel results must be buffers the kernel writes, so that bufferization
/// turns them into out-parameters: a result that is a view of an input or
/// a constant is copied into a fresh tensor.
void materializeResults(ModuleOp kernels) {
  OpBuilder builder(kernels.getContext());
  kernels.walk([&](func::ReturnOp ret) {
    builder.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Value value = operand.get();
      if (isa_and_present<linalg::LinalgOp>(value.getDefiningOp()))
        continue;
      auto type = cast<RankedTensorType>(value.getType());
      Value init = tensor::EmptyOp::create(
          builder, ret.getLoc(), type.getShape(), type.getElementType());
      operand.set(linalg::CopyOp::create(builder, ret.getLoc(), value, init)
                      .getResult(0));
    }
  });
}

struct MegPrepareKernelsPass
    : public impl::MegPrepareKernelsBase<MegPrepareKernelsPass> {
  void runOnOperation() override {
    ModuleOp kernels = getOperation();
    // Only the fusion patterns: the upstream linalg-fuse-elementwise-ops
    // pass also folds constants, which crashes on some bf16 kernels.
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *fused) {
          Operation *producer = fused->get().getDefiningOp();
          return producer && producer->hasOneUse();
        });
    // Not converging only leaves some producers unfused.
    (void)applyPatternsGreedily(kernels, std::move(patterns));
    materializeResults(kernels);
  }
};

} // namespace
} // namespace megc
