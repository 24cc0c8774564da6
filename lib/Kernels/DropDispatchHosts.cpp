//===- DropDispatchHosts.cpp - only the dispatch functions remain ------===//
//
// meg-drop-dispatch-hosts: the kernel functions, whose dispatch tables have
// been read, are erased before the CPU code is lowered.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

namespace megc {
#define GEN_PASS_DEF_MEGDROPDISPATCHHOSTS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegDropDispatchHostsPass
    : public impl::MegDropDispatchHostsBase<MegDropDispatchHostsPass> {
  void runOnOperation() override {
    for (auto function :
         llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>()))
      if (function->hasAttr(meg::MegDialect::kKernelStrategyAttrName))
        function.erase();
  }
};

} // namespace
} // namespace megc
