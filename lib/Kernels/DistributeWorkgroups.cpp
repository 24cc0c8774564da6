//===- DistributeWorkgroups.cpp - kernels as dispatches over a grid ----===//
//
// meg-distribute-workgroups: each kernel's loop nests regrouped into
// dispatches (top-level scf.forall over the workgroup id), every nest
// tiled to its workgroup's part of the domain, reductions over split
// domain dimensions computed as per-workgroup partials and combined by a
// later dispatch in workgroup order.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "DispatchPlan.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace megc {
#define GEN_PASS_DEF_MEGDISTRIBUTEWORKGROUPS
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// Partials start at multiples of this many bytes, like every temporary.
constexpr int64_t kAllocAlignment = 64;

class KernelDistributor {
public:
  KernelDistributor(func::FuncOp kernel, const GridLimits &limits)
      : kernel(kernel), limits(limits), builder(kernel.getContext()) {}

  LogicalResult run() {
    auto strategy = kernel->getAttrOfType<meg::KernelStrategyAttr>(
        meg::MegDialect::kKernelStrategyAttrName);
    if (!strategy)
      return kernel.emitError() << "kernel has no meg.kernel_strategy; run "
                                   "meg-select-kernel-strategy first";
    SmallVector<Operation *> steps = kernelSteps(kernel);
    if (steps.empty() || strategy.getKind() == meg::KernelStrategyKind::serial)
      return wrapSerial();

    DispatchPlan first =
        planDispatch(steps, strategy.getDomain(), strategy.getTile());
    if (first.members.empty())
      first = chooseDispatch(steps, limits);
    FailureOr<SmallVector<Operation *>> rest = buildPlan(first);
    if (failed(rest) || failed(buildAll(*rest)))
      return failure();
    // Users before the values they read: a step that runs as written (a
    // load of a scalar operand) may feed a later one.
    SmallVector<Operation *> dead(replaced.begin(), replaced.end());
    llvm::sort(
        dead, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
    for (Operation *op : dead)
      op->erase();
    return success();
  }

private:
  /// One dispatch of one workgroup running the whole body as written.
  LogicalResult wrapSerial() {
    Block &body = kernel.getBody().front();
    builder.setInsertionPoint(body.getTerminator());
    auto forall =
        scf::ForallOp::create(builder, kernel.getLoc(),
                              ArrayRef<OpFoldResult>{builder.getIndexAttr(1)},
                              ValueRange(), std::nullopt);
    Operation *terminator = forall.getBody()->getTerminator();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (&op == forall.getOperation() || isa<memref::AllocOp>(op) ||
          op.hasTrait<OpTrait::IsTerminator>())
        continue;
      op.moveBefore(terminator);
    }
    return success();
  }

  /// The offset of domain dimension `dim` of workgroup `workgroup`, its
  /// coordinates in the grid being row-major.
  OpFoldResult tileOffset(const DispatchPlan &plan, unsigned dim,
                          Value workgroup) {
    if (!plan.splits(dim))
      return builder.getIndexAttr(0);
    int64_t stride = 1;
    for (unsigned inner = dim + 1; inner < plan.domain.size(); ++inner)
      stride *= plan.domain[inner] / plan.tile[inner];
    int64_t pieces = plan.domain[dim] / plan.tile[dim];
    int64_t outer = 1;
    for (unsigned before = 0; before < dim; ++before)
      outer *= plan.domain[before] / plan.tile[before];
    // The outermost split dimension needs no modulus: the id is below the
    // grid size.
    AffineExpr id = builder.getAffineDimExpr(0);
    AffineExpr coordinate = id.floorDiv(stride);
    if (outer > 1)
      coordinate = coordinate % pieces;
    AffineExpr offset = coordinate * plan.tile[dim];
    return affine::makeComposedFoldedAffineApply(
        builder, kernel.getLoc(), AffineMap::get(1, 0, offset), {workgroup});
  }

  /// A [grid, output shape] buffer at the start of the kernel.
  Value allocatePartials(linalg::LinalgOp nest, int64_t grid) {
    auto output = cast<MemRefType>(nest.getDpsInitOperand(0)->get().getType());
    SmallVector<int64_t> shape = {grid};
    llvm::append_range(shape, output.getShape());
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(&kernel.getBody().front());
    return memref::AllocOp::create(
        builder, nest.getLoc(), MemRefType::get(shape, output.getElementType()),
        builder.getI64IntegerAttr(kAllocAlignment));
  }

  /// output = combine(output, partials[g]) for g = 0, 1, ... in order.
  linalg::LinalgOp buildCombine(linalg::LinalgOp nest, Value partials,
                                const Combiner &combiner) {
    OpOperand *init = nest.getDpsInitOperand(0);
    Value output = init->get();
    int64_t rank = cast<MemRefType>(output.getType()).getRank();
    MLIRContext *context = builder.getContext();
    SmallVector<AffineExpr> fromPartials = {builder.getAffineDimExpr(rank)};
    SmallVector<AffineExpr> toOutput;
    for (int64_t d = 0; d < rank; ++d) {
      fromPartials.push_back(builder.getAffineDimExpr(d));
      toOutput.push_back(builder.getAffineDimExpr(d));
    }
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    BlockArgument accumulatorArg = nest.getMatchingBlockArgument(init);
    bool accumulatorFirst = combiner.op->getOperand(0) == accumulatorArg;
    auto combine = linalg::GenericOp::create(
        builder, nest.getLoc(), TypeRange(), ValueRange{partials},
        ValueRange{output},
        {AffineMap::get(rank + 1, 0, fromPartials, context),
         AffineMap::get(rank + 1, 0, toOutput, context)},
        iterators, [&](OpBuilder &b, Location loc, ValueRange args) {
          Value part = args[0], accumulator = args[1];
          OperationState state(loc, combiner.op->getName());
          state.addOperands(accumulatorFirst ? ValueRange{accumulator, part}
                                             : ValueRange{part, accumulator});
          state.addTypes(combiner.op->getResultTypes());
          state.addAttributes(combiner.op->getAttrs());
          linalg::YieldOp::create(b, loc, b.create(state)->getResult(0));
        });
    return cast<linalg::LinalgOp>(combine.getOperation());
  }

  /// A copy of `nest` on its workgroup's tile: every operand dimension that
  /// a split domain dimension indexes becomes that tile of it (the split
  /// dimensions index operands as themselves only, see planDispatch), the
  /// indexing maps stay, and linalg.index ops of the domain are offset.
  /// `init`, if given, replaces the nest's output.
  void tileNest(linalg::LinalgOp nest, const DispatchPlan &plan,
                ArrayRef<OpFoldResult> domainOffsets, Value init) {
    Location loc = nest.getLoc();
    MLIRContext *context = builder.getContext();
    SmallVector<Value> operands;
    for (OpOperand &operand : nest->getOpOperands()) {
      Value value = cloned.lookupOrDefault(operand.get());
      if (init && nest.isDpsInit(&operand))
        value = init;
      auto type = dyn_cast<MemRefType>(value.getType());
      if (!type) {
        operands.push_back(value);
        continue;
      }
      AffineMap map = nest.getMatchingIndexingMap(&operand);
      SmallVector<OpFoldResult> offsets, sizes,
          strides(type.getRank(), builder.getIndexAttr(1));
      bool sliced = false;
      for (auto [position, size] : llvm::enumerate(type.getShape())) {
        offsets.push_back(builder.getIndexAttr(0));
        sizes.push_back(builder.getIndexAttr(size));
        for (unsigned dim = 0; dim < plan.domain.size(); ++dim)
          if (plan.splits(dim) &&
              map.getResult(position) == getAffineDimExpr(dim, context)) {
            offsets.back() = domainOffsets[dim];
            sizes.back() = builder.getIndexAttr(plan.tile[dim]);
            sliced = true;
          }
      }
      operands.push_back(sliced ? memref::SubViewOp::create(builder, loc, value,
                                                            offsets, sizes,
                                                            strides)
                                      .getResult()
                                : value);
    }
    Operation *tiled = builder.clone(*nest, cloned);
    tiled->setOperands(operands);
    SmallVector<OpFoldResult> loopOffsets(nest.getNumLoops(),
                                          builder.getIndexAttr(0));
    for (unsigned dim = 0; dim < plan.domain.size(); ++dim)
      if (plan.splits(dim))
        loopOffsets[dim] = domainOffsets[dim];
    linalg::offsetIndices(builder, cast<linalg::LinalgOp>(tiled), loopOffsets);
  }

  /// Emits the dispatches of `steps`, in order.
  LogicalResult buildAll(SmallVector<Operation *> steps) {
    while (!steps.empty()) {
      FailureOr<SmallVector<Operation *>> rest =
          buildPlan(chooseDispatch(steps, limits));
      if (failed(rest))
        return failure();
      steps = std::move(*rest);
    }
    return success();
  }

  /// Emits the dispatches of `plan`'s hoisted nests, then its own; returns
  /// the steps left for later dispatches, combines included.
  FailureOr<SmallVector<Operation *>> buildPlan(const DispatchPlan &plan) {
    if (failed(buildAll(plan.hoisted)))
      return failure();
    return buildDispatch(plan);
  }

  /// Emits the dispatch of `plan` before the return; returns the nests left
  /// for later dispatches, combines included.
  FailureOr<SmallVector<Operation *>> buildDispatch(const DispatchPlan &plan) {
    Location loc = kernel.getLoc();
    Block &body = kernel.getBody().front();
    int64_t grid = plan.gridSize();
    llvm::DenseMap<Operation *, Value> partialsOf;
    for (const DispatchPlan::Member &member : plan.members)
      if (member.partial)
        partialsOf[member.step] =
            allocatePartials(cast<linalg::LinalgOp>(member.step), grid);

    builder.setInsertionPoint(body.getTerminator());
    auto forall = scf::ForallOp::create(
        builder, loc, ArrayRef<OpFoldResult>{builder.getIndexAttr(grid)},
        ValueRange(), std::nullopt);
    builder.setInsertionPoint(forall.getBody()->getTerminator());
    Value workgroup = forall.getInductionVar(0);
    SmallVector<OpFoldResult> domainOffsets;
    for (unsigned dim = 0; dim < plan.domain.size(); ++dim)
      domainOffsets.push_back(tileOffset(plan, dim, workgroup));

    for (const DispatchPlan::Member &member : plan.members) {
      replaced.insert(member.step);
      auto nest = dyn_cast<linalg::LinalgOp>(member.step);
      if (!nest) {
        // Runs as written (in a dispatch of one workgroup).
        builder.clone(*member.step, cloned);
        continue;
      }
      Value init;
      if (member.partial) {
        // The nest, reducing into this workgroup's slice of the partials.
        FailureOr<Combiner> combiner = matchCombiner(nest);
        Value partials = partialsOf.lookup(nest);
        auto partialsType = cast<MemRefType>(partials.getType());
        auto outputType =
            cast<MemRefType>(nest.getDpsInitOperand(0)->get().getType());
        int64_t rank = partialsType.getRank();
        SmallVector<OpFoldResult> sliceOffsets(rank, builder.getIndexAttr(0));
        sliceOffsets[0] = workgroup;
        SmallVector<OpFoldResult> sliceSizes = {builder.getIndexAttr(1)};
        for (int64_t size : outputType.getShape())
          sliceSizes.push_back(builder.getIndexAttr(size));
        SmallVector<OpFoldResult> strides(rank, builder.getIndexAttr(1));
        auto sliceType = memref::SubViewOp::inferRankReducedResultType(
            outputType.getShape(), partialsType, sliceOffsets, sliceSizes,
            strides);
        init = memref::SubViewOp::create(builder, loc, sliceType, partials,
                                         sliceOffsets, sliceSizes, strides);
        Value neutral =
            arith::ConstantOp::create(builder, loc, combiner->neutral);
        linalg::FillOp::create(builder, loc, ValueRange{neutral},
                               ValueRange{init});
      }
      tileNest(nest, plan, domainOffsets, init);
    }

    // Combines go where their partial nests would have, among the rest.
    builder.setInsertionPoint(body.getTerminator());
    SmallVector<Operation *> next;
    for (auto [step, combine] : llvm::zip(plan.rest, plan.restIsCombine)) {
      if (!combine) {
        next.push_back(step);
        continue;
      }
      auto nest = cast<linalg::LinalgOp>(step);
      FailureOr<Combiner> combiner = matchCombiner(nest);
      next.push_back(buildCombine(nest, partialsOf.lookup(nest), *combiner)
                         .getOperation());
    }
    return next;
  }

  func::FuncOp kernel;
  /// The grid of the dispatches after the one the strategy describes.
  GridLimits limits;
  OpBuilder builder;
  /// Results of steps cloned as written into a dispatch.
  IRMapping cloned;
  /// Nests now carried out by dispatches, erased at the end.
  llvm::SetVector<Operation *> replaced;
};

struct MegDistributeWorkgroupsPass
    : public impl::MegDistributeWorkgroupsBase<MegDistributeWorkgroupsPass> {
  using Base::Base;

  void runOnOperation() override {
    GridLimits limits = targetGrid(meg::TargetAttr::of(getOperation())).limits;
    for (auto kernel : getOperation().getOps<func::FuncOp>())
      if (failed(KernelDistributor(kernel, limits).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace megc
