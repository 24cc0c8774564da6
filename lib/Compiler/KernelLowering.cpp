//===- KernelLowering.cpp - steps shared by the kernel generators ------===//
//
// meg -> linalg -> bufferized destination-passing kernels.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

#include "megc/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace megc {

namespace {

constexpr llvm::StringLiteral kBufferize =
    "builtin.module(convert-meg-to-linalg,canonicalize,"
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs "
    "modify-public-functions},buffer-deallocation-pipeline)";

/// Kernel results must be buffers the kernel writes, so that bufferization
/// turns them into out-parameters: a result that is a view of an input or
/// a constant is copied into a fresh tensor.
void materializeResults(ModuleOp kernels) {
  OpBuilder builder(kernels.getContext());
  kernels.walk([&](func::ReturnOp ret) {
    builder.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Value value = operand.get();
      if (isa_and_present<linalg::LinalgOp>(value.getDefiningOp()))
        continue;
      auto type = cast<RankedTensorType>(value.getType());
      Value init = tensor::EmptyOp::create(builder, ret.getLoc(),
                                           type.getShape(),
                                           type.getElementType());
      operand.set(linalg::CopyOp::create(builder, ret.getLoc(), value, init)
                      .getResult(0));
    }
  });
}

/// A strided memref.copy would lower to a call into MLIR's C runner
/// library; as linalg.copy it becomes plain loops in the kernel.
void copiesToLinalg(ModuleOp kernels) {
  OpBuilder builder(kernels.getContext());
  kernels.walk([&](memref::CopyOp copy) {
    builder.setInsertionPoint(copy);
    linalg::CopyOp::create(builder, copy.getLoc(), copy.getSource(),
                           copy.getTarget());
    copy.erase();
  });
}

/// Merges each elementwise linalg.generic into its consumer when the
/// consumer is its only user, so that a fused kernel is one loop nest and
/// its intermediates never reach memory. (The upstream
/// linalg-fuse-elementwise-ops pass also folds constants, which crashes on
/// some bf16 kernels; only the fusion patterns are wanted here.)
void fuseElementwise(ModuleOp kernels) {
  RewritePatternSet patterns(kernels.getContext());
  linalg::populateElementwiseOpsFusionPatterns(
      patterns, [](OpOperand *fused) {
        Operation *producer = fused->get().getDefiningOp();
        return producer && producer->hasOneUse();
      });
  (void)applyPatternsGreedily(kernels, std::move(patterns));
}

} // namespace

LogicalResult runPipeline(ModuleOp module, StringRef text) {
  FailureOr<OpPassManager> pipeline = parsePassPipeline(text);
  if (failed(pipeline))
    return emitError(module.getLoc()) << "internal error: bad pipeline " << text;
  PassManager pm(module.getContext());
  static_cast<OpPassManager &>(pm) = std::move(*pipeline);
  // --mlir-timing, --mlir-print-ir-*, crash reproducers.
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  return pm.run(module);
}

LogicalResult bufferizeKernels(ModuleOp kernels) {
  PassManager toLinalg(kernels.getContext());
  toLinalg.addPass(meg::createConvertMegToLinalg());
  if (failed(toLinalg.run(kernels)))
    return failure();
  fuseElementwise(kernels);
  materializeResults(kernels);
  if (failed(runPipeline(kernels, kBufferize)))
    return failure();
  copiesToLinalg(kernels);
  return success();
}

} // namespace megc
