//===- ApproximateMath.cpp - vectorizable transcendental functions -----===//
//
// meg-approximate-math: MLIR's polynomial approximations instead of libm
// calls, which keep a loop scalar.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSwitch.h"

namespace megc {
#define GEN_PASS_DEF_MEGAPPROXIMATEMATH
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// The functions whose approximations hold f32 accuracy over the whole
/// range. sin and cos are left to libm: their approximations lose accuracy
/// for the large arguments of RoPE tables (position times frequency).
bool approximated(StringRef name) {
  name.consume_front("math.");
  return llvm::StringSwitch<bool>(name)
      .Cases({"exp", "expm1", "log", "log1p", "log2", "tanh", "erf"}, true)
      .Default(false);
}

struct MegApproximateMathPass
    : public impl::MegApproximateMathBase<MegApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathF32ExpansionPatterns(patterns, approximated);
    populateMathPolynomialApproximationPatterns(patterns, approximated);
    if (!fma)
      math::populateExpansionPatterns(patterns, {"fma"});
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace megc
