//===- LowerGpuReductions.cpp - block and warp reductions as shuffles --===//
//
// meg-lower-gpu-reductions: the gpu.all_reduce and gpu.subgroup_reduce ops
// that meg-map-kernels-to-gpu emits for row reductions, rewritten with
// MLIR's own lowerings into xor shuffles (and, for a block, a shared-memory
// buffer and barriers) before convert-gpu-to-nvvm, which lowers neither.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace megc {
#define GEN_PASS_DEF_MEGLOWERGPUREDUCTIONS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegLowerGpuReductionsPass
    : public impl::MegLowerGpuReductionsBase<MegLowerGpuReductionsPass> {
  using Base::Base;

  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    WalkResult structured = module.walk([&](gpu::AllReduceOp reduce) {
      if (!isa<gpu::GPUFuncOp>(reduce->getParentOp())) {
        reduce.emitError() << "meg-lower-gpu-reductions: the block "
                              "reduction is inside structured control flow, "
                              "whose single-block regions its lowering "
                              "would split; run convert-scf-to-cf first";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (structured.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateGpuAllReducePatterns(patterns);
    populateGpuLowerSubgroupReduceToShufflePatterns(patterns, subgroupSize,
                                                    /*shuffleBitwidth=*/32);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    WalkResult left = module.walk([&](Operation *op) {
      if (!isa<gpu::AllReduceOp, gpu::SubgroupReduceOp>(op))
        return WalkResult::advance();
      op->emitError() << "meg-lower-gpu-reductions: no lowering for this "
                         "reduction (it must be uniform, of a 32-bit type)";
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace megc
