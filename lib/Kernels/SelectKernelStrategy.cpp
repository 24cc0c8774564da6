//===- SelectKernelStrategy.cpp - a strategy recorded on every kernel --===//
//
// meg-select-kernel-strategy: the first dispatch of each kernel planned
// for the target's grid limits, classified, and recorded as
// #meg.kernel_strategy.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "DispatchPlan.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Kernels/CudaArch.h"

namespace megc {
#define GEN_PASS_DEF_MEGSELECTKERNELSTRATEGY
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// Every kernel computes in f32 (16-bit values are widened).
constexpr unsigned kComputeBits = 32;

struct MegSelectKernelStrategyPass
    : public impl::MegSelectKernelStrategyBase<MegSelectKernelStrategyPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *context) override {
    if (target == "cpu") {
      if (vectorBits < kComputeBits || !llvm::isPowerOf2_32(vectorBits))
        return emitError(UnknownLoc::get(context))
               << "meg-select-kernel-strategy: vector-bits "
               << static_cast<unsigned>(vectorBits)
               << " is not a power of two of at least " << kComputeBits;
      limits = cpuGridLimits();
      vectorWidth = vectorBits / kComputeBits;
      return success();
    }
    if (target != "cuda")
      return emitError(UnknownLoc::get(context))
             << "meg-select-kernel-strategy: unknown target '" << target
             << "'; expected cpu or cuda";
    llvm::Expected<CudaArch> arch = CudaArch::parse(cudaArch, "cuda-arch");
    if (!arch)
      return emitError(UnknownLoc::get(context))
             << "meg-select-kernel-strategy: "
             << llvm::toString(arch.takeError());
    // A block's threads each take a few vectors of its tile; grids of up to
    // 2^16 blocks.
    vectorWidth = arch->vectorBytes() * 8 / kComputeBits;
    limits.minWork = arch->threadsPerBlock() * vectorWidth;
    limits.maxGrid = 65536;
    return success();
  }

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    for (auto kernel : getOperation().getOps<func::FuncOp>()) {
      meg::KernelStrategyAttr strategy;
      SmallVector<Operation *> steps = kernelSteps(kernel);
      if (steps.empty()) {
        strategy = meg::KernelStrategyAttr::get(
            context, meg::KernelStrategyKind::serial, {}, {}, vectorWidth);
      } else {
        DispatchPlan plan = chooseDispatch(steps, limits);
        meg::KernelStrategyKind kind = classify(plan);
        if (kind == meg::KernelStrategyKind::serial)
          strategy =
              meg::KernelStrategyAttr::get(context, kind, {}, {}, vectorWidth);
        else
          strategy = meg::KernelStrategyAttr::get(context, kind, plan.domain,
                                                  plan.tile, vectorWidth);
      }
      kernel->setAttr(meg::MegDialect::kKernelStrategyAttrName, strategy);
    }
  }

  GridLimits limits;
  int64_t vectorWidth = 1;
};

} // namespace
} // namespace megc
