//===- UpdateInPlace.cpp - results written into updated arguments -----===//
//
// meg-update-in-place: out-parameters of results marked meg.in_place are
// replaced by the argument they update.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "llvm/ADT/BitVector.h"

namespace megc {
#define GEN_PASS_DEF_MEGUPDATEINPLACE
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegUpdateInPlacePass
    : public impl::MegUpdateInPlaceBase<MegUpdateInPlacePass> {
  void runOnOperation() override {
    for (auto kernel : getOperation().getOps<func::FuncOp>()) {
      auto inPlace = kernel->getAttrOfType<DenseI64ArrayAttr>(
          meg::MegDialect::kInPlaceAttrName);
      if (!inPlace)
        continue;
      ArrayRef<int64_t> updated = inPlace.asArrayRef();
      unsigned results = updated.size();
      unsigned arguments = kernel.getNumArguments();
      // The out-parameters, one per result, are the last arguments.
      if (kernel.getNumResults() != 0 || arguments < results) {
        kernel.emitError() << "meg.in_place on a kernel that is not "
                              "destination-passing";
        return signalPassFailure();
      }
      unsigned firstOut = arguments - results;
      llvm::BitVector erased(arguments);
      for (auto [index, argument] : llvm::enumerate(updated)) {
        if (argument < 0)
          continue;
        BlockArgument out = kernel.getArgument(firstOut + index);
        BlockArgument in = kernel.getArgument(argument);
        if (out.getType() != in.getType()) {
          kernel.emitError() << "meg.in_place: result " << index << " of type "
                             << out.getType() << " cannot update argument "
                             << argument << " of type " << in.getType();
          return signalPassFailure();
        }
        out.replaceAllUsesWith(in);
        erased.set(firstOut + index);
      }
      if (failed(kernel.eraseArguments(erased)))
        return signalPassFailure();
      kernel->removeAttr(meg::MegDialect::kInPlaceAttrName);
    }
  }
};

} // namespace
} // namespace megc
