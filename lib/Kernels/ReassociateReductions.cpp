//===- ReassociateReductions.cpp - reductions the vectorizer may split --===//
//
// meg-reassociate-reductions: the combiner of every linalg reduction gets
// fastmath<reassoc>, without which LLVM keeps a float reduction scalar.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"

namespace megc {
#define GEN_PASS_DEF_MEGREASSOCIATEREDUCTIONS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

struct MegReassociateReductionsPass
    : public impl::MegReassociateReductionsBase<MegReassociateReductionsPass> {
  void runOnOperation() override {
    getOperation().walk([](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() == 0)
        return;
      Block *body = op.getBlock();
      SmallVector<BlockArgument> outputs;
      for (OpOperand &init : op.getDpsInitsMutable())
        outputs.push_back(op.getMatchingBlockArgument(&init));
      for (unsigned i = 0; i < outputs.size(); ++i) {
        SmallVector<Operation *, 4> combiners;
        if (!matchReduction(outputs, i, combiners) || combiners.size() != 1)
          continue;
        auto fastMath =
            dyn_cast<arith::ArithFastMathInterface>(combiners.front());
        if (!fastMath || combiners.front()->getBlock() != body)
          continue;
        arith::FastMathFlags flags =
            fastMath.getFastMathFlagsAttr()
                ? fastMath.getFastMathFlagsAttr().getValue()
                : arith::FastMathFlags::none;
        combiners.front()->setAttr(
            fastMath.getFastMathAttrName(),
            arith::FastMathFlagsAttr::get(
                op.getContext(), flags | arith::FastMathFlags::reassoc));
      }
    });
  }
};

} // namespace
} // namespace megc
