//===- AlignWorkgroupBuffers.cpp - shared buffers aligned for vectors ---===//
//
// meg-align-workgroup-buffers: every workgroup buffer of an outlined
// kernel gets an alignment for 128-bit accesses, which convert-gpu-to-nvvm
// gives the shared-memory global it makes. Without it a buffer is aligned
// to its element only, and the vector accesses of a tile staged there
// (meg-map-kernels-to-gpu) would take their element loop.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace megc {
#define GEN_PASS_DEF_MEGALIGNWORKGROUPBUFFERS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegAlignWorkgroupBuffersPass
    : public impl::MegAlignWorkgroupBuffersBase<MegAlignWorkgroupBuffersPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *context) override {
    if (alignment == 0 || !llvm::isPowerOf2_64(alignment))
      return emitError(UnknownLoc::get(context))
             << "meg-align-workgroup-buffers: alignment "
             << static_cast<uint64_t>(alignment) << " is not a power of two";
    return success();
  }

  void runOnOperation() override {
    StringRef name = LLVM::LLVMDialect::getAlignAttrName();
    getOperation().walk([&](gpu::GPUFuncOp kernel) {
      for (unsigned index = 0; index < kernel.getNumWorkgroupAttributions();
           ++index) {
        auto current = dyn_cast_or_null<IntegerAttr>(
            kernel.getWorkgroupAttributionAttr(index, name));
        if (current && current.getInt() >= static_cast<int64_t>(alignment))
          continue;
        kernel.setWorkgroupAttributionAttr(
            index, name,
            IntegerAttr::get(IntegerType::get(kernel.getContext(), 64),
                             alignment));
      }
    });
  }
};

} // namespace
} // namespace megc
