//===- SetTarget.cpp - the kernels' device as #meg.target ---------------===//
//
// meg-set-target: its options, parsed once, recorded as the module's
// meg.target for the kernel passes to read.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

namespace megc {
#define GEN_PASS_DEF_MEGSETTARGET
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegSetTargetPass : public impl::MegSetTargetBase<MegSetTargetPass> {
  using Base::Base;
  /// A target already parsed (the pipelines of the driver's options).
  MegSetTargetPass(unsigned bits, std::optional<CudaArch> arch)
      : typedArch(arch) {
    vectorBits = bits;
    target = arch ? "cuda" : "cpu";
  }

  LogicalResult initialize(MLIRContext *context) override {
    auto fail = [&]() {
      return emitError(UnknownLoc::get(context)) << "meg-set-target: ";
    };
    if (typedArch) {
      attr = meg::TargetAttr::getCuda(context, *typedArch);
      return success();
    }
    if (target == "cpu") {
      // The attribute's verifier names what is wrong with the width.
      attr = meg::TargetAttr::getChecked([&] { return fail(); }, context,
                                         meg::TargetKind::cpu,
                                         unsigned(vectorBits), 0u, 0u, char(0));
      return success(static_cast<bool>(attr));
    }
    if (target != "cuda")
      return fail() << "unknown target '" << target
                    << "'; expected cpu or cuda";
    llvm::Expected<CudaArch> arch = CudaArch::parse(cudaArch, "cuda-arch");
    if (!arch)
      return fail() << llvm::toString(arch.takeError());
    attr = meg::TargetAttr::getCuda(context, *arch);
    return success();
  }

  void runOnOperation() override {
    getOperation()->setAttr(meg::MegDialect::kTargetAttrName, attr);
  }

  std::optional<CudaArch> typedArch;
  meg::TargetAttr attr;
};

} // namespace

std::unique_ptr<Pass> createMegSetCpuTarget(unsigned vectorBits) {
  return std::make_unique<MegSetTargetPass>(vectorBits, std::nullopt);
}

std::unique_ptr<Pass> createMegSetCudaTarget(const CudaArch &arch) {
  return std::make_unique<MegSetTargetPass>(0, arch);
}

} // namespace megc
