//===- MegToLinalg.cpp - the convert-meg-to-linalg pass ----------------===//
//
// Applies the meg-to-linalg patterns and reports any compute op left.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "megc/Conversion/Passes.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::meg {
#define GEN_PASS_DEF_CONVERTMEGTOLINALG
#include "megc/Conversion/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

void mlir::meg::populateMegToLinalgPatterns(RewritePatternSet &patterns) {
  populateElementwisePatterns(patterns);
  populateShapePatterns(patterns);
  populateNormPatterns(patterns);
  populateContractionPatterns(patterns);
  populateLossPatterns(patterns);
  populateGradPatterns(patterns);
  populateOptimizerPatterns(patterns);
  populateMoePatterns(patterns);
}

namespace {
struct ConvertMegToLinalgPass
    : public mlir::meg::impl::ConvertMegToLinalgBase<ConvertMegToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           scf::SCFDialect>();
    // Left for the program lowering: module symbols, parameter reads,
    // collectives, regions; every other meg op is converted.
    target.addDynamicallyLegalDialect<MegDialect>([](Operation *op) {
      return isa<ParamOp, ParamRefOp, MeshOp, SubmeshOp, CollectiveOpInterface,
                 WaitOp, FusionOp, GraphRegionOp, YieldOp>(op);
    });
    RewritePatternSet patterns(context);
    populateMegToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
