//===- CopiesToLinalg.cpp - memref.copy as linalg.copy -----------------===//
//
// meg-copies-to-linalg: copies become loops of the kernel rather than calls
// into MLIR's C runner library, which the runtime does not carry.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/IR/Builders.h"

namespace megc {
#define GEN_PASS_DEF_MEGCOPIESTOLINALG
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegCopiesToLinalgPass
    : public impl::MegCopiesToLinalgBase<MegCopiesToLinalgPass> {
  void runOnOperation() override {
    OpBuilder builder(&getContext());
    getOperation().walk([&](memref::CopyOp copy) {
      builder.setInsertionPoint(copy);
      linalg::CopyOp::create(builder, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    });
  }
};

} // namespace
} // namespace megc
