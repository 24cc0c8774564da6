//===- MapKernelsToGpu.cpp - kernel functions as GPU launches ----------===//
//
// meg-map-kernels-to-gpu. Kernel functions reach the GPU mapping as linalg
// ops on buffers. Every loop nest must become one scf.parallel at the top
// level of its function: only those turn into launches, and whatever else
// stays at the top level would run on the host against device memory.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/Passes.h"

namespace megc {
#define GEN_PASS_DEF_MEGMAPKERNELSTOGPU
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// Reorders the loops of every linalg op so that parallel dimensions come
/// before reductions: the parallel ones then map onto threads and each
/// thread runs its reduction serially, instead of a host loop of launches.
void hoistParallelDimensions(ModuleOp kernels) {
  IRRewriter rewriter(kernels.getContext());
  SmallVector<linalg::LinalgOp> ops;
  kernels.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
  for (linalg::LinalgOp op : ops) {
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<unsigned> order;
    for (unsigned i = 0; i < iterators.size(); ++i)
      if (iterators[i] == utils::IteratorType::parallel)
        order.push_back(i);
    for (unsigned i = 0; i < iterators.size(); ++i)
      if (iterators[i] != utils::IteratorType::parallel)
        order.push_back(i);
    if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
      continue;
    rewriter.setInsertionPoint(op);
    auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
    if (!generic) {
      FailureOr<linalg::GenericOp> generalized =
          linalg::generalizeNamedOp(rewriter, op);
      if (failed(generalized))
        continue; // no region builder: keeps its loop order
      generic = *generalized;
    }
    (void)linalg::interchangeGenericOp(rewriter, generic, order);
  }
}

/// Ops that stay at the top level of a kernel function: loop nests (they
/// become launches), allocations and views (the launch table resolves
/// them), constants (sunk into the kernels) and the return.
bool staysAtTopLevel(Operation &op) {
  return isa<scf::ParallelOp, memref::AllocOp, memref::DeallocOp,
             memref::GetGlobalOp, ViewLikeOpInterface, func::ReturnOp>(op) ||
         op.hasTrait<OpTrait::ConstantLike>();
}

/// Moves `ops` (consecutive, in one block) into a new one-iteration
/// scf.parallel.
LogicalResult wrapInParallel(ArrayRef<Operation *> ops, func::FuncOp func) {
  llvm::SmallPtrSet<Operation *, 8> group(ops.begin(), ops.end());
  for (Operation *op : ops) {
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (!group.contains(
                func.getBody().front().findAncestorOpInBlock(*user)))
          return op->emitError()
                 << "cannot run on a GPU: kernel '" << func.getName()
                 << "' computes a value on the host that later host code "
                    "reads";
    bool nested = false;
    op->walk([&](scf::ParallelOp) { nested = true; });
    if (nested)
      return op->emitError()
             << "cannot run on a GPU: kernel '" << func.getName()
             << "' has a parallel loop inside serial code";
  }
  OpBuilder builder(ops.front());
  Location loc = ops.front()->getLoc();
  Value zero = arith::ConstantIndexOp::create(builder, loc, 0);
  Value one = arith::ConstantIndexOp::create(builder, loc, 1);
  auto loop = scf::ParallelOp::create(builder, loc, ValueRange{zero},
                                      ValueRange{one}, ValueRange{one});
  Operation *terminator = loop.getBody()->getTerminator();
  for (Operation *op : ops)
    op->moveBefore(terminator);
  return success();
}

/// After linalg became loops: wraps each run of code left at the top level
/// of a kernel function (scalar code, serial reductions) into a
/// one-iteration scf.parallel, so that it runs on the device too, and
/// collapses every loop nest into one dimension. Fails, naming the op, on
/// code that cannot be moved (a value it defines is used by code that stays
/// on the host).
LogicalResult prepareParallelLoops(ModuleOp kernels) {
  for (auto func : kernels.getOps<func::FuncOp>()) {
    SmallVector<SmallVector<Operation *>> groups(1);
    for (Operation &op : func.getBody().front()) {
      if (staysAtTopLevel(op)) {
        if (!groups.back().empty())
          groups.emplace_back();
        continue;
      }
      groups.back().push_back(&op);
    }
    for (ArrayRef<Operation *> group : groups)
      if (!group.empty() && failed(wrapInParallel(group, func)))
        return failure();
  }

  // One dimension per nest, so that tiling maps the whole iteration space
  // onto blocks of threads.
  SmallVector<scf::ParallelOp> loops;
  kernels.walk([&](scf::ParallelOp loop) {
    if (!loop->getParentOfType<scf::ParallelOp>() && loop.getNumLoops() > 1)
      loops.push_back(loop);
  });
  IRRewriter rewriter(kernels.getContext());
  for (scf::ParallelOp loop : loops) {
    std::vector<unsigned> all(loop.getNumLoops());
    for (unsigned i = 0; i < all.size(); ++i)
      all[i] = i;
    rewriter.setInsertionPoint(loop);
    mlir::collapseParallelLoops(rewriter, loop, {all});
  }
  return success();
}

/// Clones the constants (memref.get_global) that a gpu.launch reads into
/// its body, so that outlining copies the globals into the device module.
void sinkGlobalsIntoLaunches(ModuleOp kernels) {
  SmallVector<memref::GetGlobalOp> globals;
  kernels.walk([&](memref::GetGlobalOp op) {
    if (!op->getParentOfType<gpu::LaunchOp>())
      globals.push_back(op);
  });
  for (memref::GetGlobalOp global : globals) {
    llvm::DenseMap<Operation *, Value> copies;
    for (OpOperand &use : llvm::make_early_inc_range(global->getUses())) {
      auto launch = use.getOwner()->getParentOfType<gpu::LaunchOp>();
      if (!launch)
        continue;
      Value &copy = copies[launch];
      if (!copy) {
        OpBuilder builder = OpBuilder::atBlockBegin(&launch.getBody().front());
        copy = builder.clone(*global)->getResult(0);
      }
      use.set(copy);
    }
    if (global->use_empty())
      global->erase();
  }
}

struct MegMapKernelsToGpuPass
    : public impl::MegMapKernelsToGpuBase<MegMapKernelsToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp kernels = getOperation();
    hoistParallelDimensions(kernels);
    OpPassManager toLoops(ModuleOp::getOperationName());
    toLoops.addNestedPass<func::FuncOp>(
        createConvertLinalgToParallelLoopsPass());
    toLoops.addNestedPass<func::FuncOp>(createCanonicalizerPass());
    if (failed(runPipeline(toLoops, kernels)) ||
        failed(prepareParallelLoops(kernels)))
      return signalPassFailure();
    // Each (collapsed) loop nest tiled by the block's threads and the tiles
    // mapped to blocks: one gpu.launch per nest. No canonicalization before
    // the mapping: it would fold the one-iteration loops that carry serial
    // code.
    OpPassManager toLaunches(ModuleOp::getOperationName());
    OpPassManager &perKernel = toLaunches.nest<func::FuncOp>();
    perKernel.addPass(createParallelLoopTilingPass(
        {static_cast<int64_t>(threadsPerBlock)}, /*noMinMaxBounds=*/true));
    perKernel.addPass(createGpuMapParallelLoopsPass());
    perKernel.addPass(createConvertParallelLoopToGpuPass());
    perKernel.addPass(createCanonicalizerPass());
    perKernel.addPass(createGpuLaunchSinkIndexComputationsPass());
    if (failed(runPipeline(toLaunches, kernels)))
      return signalPassFailure();
    sinkGlobalsIntoLaunches(kernels);
  }
};

} // namespace
} // namespace megc
