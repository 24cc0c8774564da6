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

namespace megc {
#define GEN_PASS_DEF_MEGSELECTKERNELSTRATEGY
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegSelectKernelStrategyPass
    : public impl::MegSelectKernelStrategyBase<MegSelectKernelStrategyPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    TargetGrid grid = targetGrid(meg::TargetAttr::of(getOperation()));
    GridLimits limits = grid.limits;
    int64_t vectorWidth = grid.vectorWidth;
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
};

} // namespace
} // namespace megc
