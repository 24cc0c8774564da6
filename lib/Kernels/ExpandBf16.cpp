//===- ExpandBf16.cpp - bf16 conversions as integer arithmetic ---------===//
//
// meg-expand-bf16: the bf16 part of arith-expand, without its expansion of
// maximumf/minimumf into compares and selects (which LLVM cannot turn back
// into vector reductions).
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace megc {
#define GEN_PASS_DEF_MEGEXPANDBF16
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegExpandBf16Pass : public impl::MegExpandBf16Base<MegExpandBf16Pass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace megc
