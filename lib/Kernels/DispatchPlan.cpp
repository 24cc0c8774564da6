//===- DispatchPlan.cpp - which loop nests share a dispatch grid -------===//
//
// A nest joins a dispatch when its leading loops are the domain and no
// other workgroup can touch what it reads or writes: every buffer that two
// nests of the dispatch share, one of them writing, is indexed by each
// split domain dimension at the same position in both, through the same
// view.
//
//===----------------------------------------------------------------------===//

#include "DispatchPlan.h"

#include "megc/Target/CudaArch.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <algorithm>
#include <tuple>

using namespace mlir;

namespace megc {

namespace {

/// Nominal parallelism for comparing candidate domains; a fixed number, so
/// that choices depend on shapes only.
constexpr int64_t kNominalWorkers = 16;
/// What running a nest in another dispatch than this one costs, as a factor
/// of its parallel time there: its data is read from memory once more.
constexpr double kDeferredFactor = 1.5;

/// One way a step touches a buffer: through `view`, at `map` of its loops
/// (null when the index is computed in the body); `everything` for a step
/// that is not a loop nest, which may touch any buffer.
struct Access {
  Value base, view;
  AffineMap map;
  bool write;
  bool everything = false;
};

/// The accesses of `nest`; as a partial nest it does not touch its output.
SmallVector<Access> accessesOf(linalg::LinalgOp nest, bool partial) {
  SmallVector<Access> accesses;
  for (OpOperand *input : nest.getDpsInputOperands())
    accesses.push_back({baseOf(input->get()), input->get(),
                        nest.getMatchingIndexingMap(input), false});
  if (!partial)
    for (OpOperand &init : nest.getDpsInitsMutable())
      accesses.push_back({baseOf(init.get()), init.get(),
                          nest.getMatchingIndexingMap(&init), true});
  // Buffers the body reads or writes directly (gathers, label lookups).
  nest->walk([&](Operation *inner) {
    if (inner == nest.getOperation())
      return;
    bool writes = isa<memref::StoreOp>(inner);
    for (Value operand : inner->getOperands())
      if (isa<MemRefType>(operand.getType()) &&
          !nest->isAncestor(operand.getParentRegion()->getParentOp()))
        accesses.push_back({baseOf(operand), operand, AffineMap(), writes});
  });
  return accesses;
}

/// The accesses of the combine that follows a partial nest: it reads and
/// writes the nest's output.
SmallVector<Access> combineAccesses(linalg::LinalgOp nest) {
  SmallVector<Access> accesses;
  for (OpOperand &init : nest.getDpsInitsMutable())
    accesses.push_back({baseOf(init.get()), init.get(), AffineMap(), true});
  return accesses;
}

/// Two nests of one dispatch conflict on a shared buffer one of them writes
/// unless both index it by every split dimension at the same position.
bool conflicts(const Access &a, const Access &b, const DispatchPlan &plan) {
  if (a.base != b.base || (!a.write && !b.write) || plan.gridSize() == 1)
    return false;
  if (!a.map || !b.map || a.view != b.view)
    return true;
  MLIRContext *context = a.map.getContext();
  for (unsigned dim = 0; dim < plan.domain.size(); ++dim) {
    if (!plan.splits(dim))
      continue;
    AffineExpr expr = getAffineDimExpr(dim, context);
    bool aligned = false;
    for (unsigned j = 0; j < a.map.getNumResults() && j < b.map.getNumResults();
         ++j)
      aligned |= a.map.getResult(j) == expr && b.map.getResult(j) == expr;
    if (!aligned)
      return true;
  }
  return false;
}

/// A nest touches buffers a later dispatch touches too (one of them
/// writing): it must stay after that dispatch's nests.
bool overlaps(ArrayRef<Access> accesses, ArrayRef<Access> deferred) {
  for (const Access &a : accesses)
    for (const Access &b : deferred)
      if (a.everything || b.everything ||
          (a.base == b.base && (a.write || b.write)))
        return true;
  return false;
}

/// What a step that is not a loop nest touches: anything.
SmallVector<Access> opaqueAccesses() {
  Access all;
  all.write = true;
  all.everything = true;
  return {all};
}

enum class Fit { No, Tiled, Partial };

/// How `nest` joins a dispatch of `plan`'s domain and tile.
Fit fits(linalg::LinalgOp nest, const DispatchPlan &plan) {
  // One workgroup runs every nest as written.
  if (plan.gridSize() == 1)
    return Fit::Tiled;
  SmallVector<int64_t> extents = nest.getStaticLoopRanges();
  unsigned rank = plan.domain.size();
  if (extents.size() < rank ||
      !llvm::equal(ArrayRef(extents).take_front(rank), plan.domain))
    return Fit::No;
  MLIRContext *context = nest.getContext();
  // A split dimension must index operands as itself only: tiling maps a
  // compound index (a partner, a modulus) onto subviews that may not hold
  // what it reads.
  for (AffineMap map : nest.getIndexingMapsArray())
    for (AffineExpr result : map.getResults())
      for (unsigned dim = 0; dim < rank; ++dim)
        if (plan.splits(dim) && result.isFunctionOfDim(dim) &&
            result != getAffineDimExpr(dim, context))
          return Fit::No;
  SmallVector<utils::IteratorType> iterators = nest.getIteratorTypesArray();
  bool reducesSplitDim = false;
  for (unsigned dim = 0; dim < rank; ++dim)
    reducesSplitDim |=
        plan.splits(dim) && iterators[dim] == utils::IteratorType::reduction;
  if (reducesSplitDim)
    return succeeded(matchCombiner(nest)) ? Fit::Partial : Fit::No;
  // Each workgroup writes its own part of every output.
  for (OpOperand &init : nest.getDpsInitsMutable()) {
    AffineMap map = nest.getMatchingIndexingMap(&init);
    for (unsigned dim = 0; dim < rank; ++dim)
      if (plan.splits(dim) &&
          !llvm::is_contained(map.getResults(), getAffineDimExpr(dim, context)))
        return Fit::No;
  }
  return Fit::Tiled;
}

/// Iterations of a step (1 for one that is not a loop nest).
int64_t volume(Operation *step) {
  auto nest = dyn_cast<linalg::LinalgOp>(step);
  int64_t total = 1;
  if (nest)
    for (int64_t extent : nest.getStaticLoopRanges())
      total *= extent;
  return total;
}

} // namespace

SmallVector<Operation *> kernelSteps(func::FuncOp kernel) {
  SmallVector<Operation *> steps;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<memref::AllocOp, memref::GetGlobalOp, ViewLikeOpInterface,
            func::ReturnOp>(op) ||
        op.hasTrait<OpTrait::ConstantLike>())
      continue;
    // Only statically shaped loop nests on buffers can be tiled.
    auto nest = dyn_cast<linalg::LinalgOp>(op);
    if (nest &&
        (!nest.hasPureBufferSemantics() ||
         llvm::is_contained(nest.getStaticLoopRanges(), ShapedType::kDynamic)))
      nest = nullptr;
    steps.push_back(nest ? nest.getOperation() : &op);
  }
  return steps;
}

FailureOr<Combiner> matchCombiner(linalg::LinalgOp nest) {
  if (nest.getNumDpsInits() != 1 || nest.getNumReductionLoops() == 0)
    return failure();
  BlockArgument output =
      nest.getMatchingBlockArgument(nest.getDpsInitOperand(0));
  SmallVector<Operation *, 4> combiners;
  if (!matchReduction({output}, 0, combiners) || combiners.size() != 1)
    return failure();
  Operation *op = combiners.front();
  if (op->getNumOperands() != 2 || op->getNumResults() != 1)
    return failure();
  std::optional<TypedAttr> neutral = arith::getNeutralElement(op);
  if (!neutral)
    return failure();
  return Combiner{op, *neutral};
}

Value baseOf(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
    value = view.getViewSource();
  return value;
}

GridLimits cpuGridLimits() { return GridLimits(); }

TargetGrid targetGrid(meg::TargetAttr target) {
  // Every kernel computes in f32 (16-bit values are widened).
  constexpr unsigned kComputeBits = 32;
  TargetGrid grid;
  if (!target.isCuda()) {
    // The attribute's verifier keeps the width a power of two of at least
    // one f32.
    grid.limits = cpuGridLimits();
    grid.vectorWidth = target.getVectorBits() / kComputeBits;
    return grid;
  }
  CudaArch arch = target.getCudaArch();
  // A block's threads each take at least one vector of its tile; grids of
  // about as many blocks as the GPU keeps resident, which bounds the
  // partials of a column reduction to that many rows.
  grid.vectorWidth = arch.vectorBytes() * 8 / kComputeBits;
  grid.limits.minWork = arch.threadsPerBlock() * grid.vectorWidth;
  grid.limits.maxGrid = static_cast<int64_t>(arch.multiprocessors()) *
                        arch.blocksPerMultiprocessor();
  return grid;
}

int64_t DispatchPlan::gridSize() const {
  int64_t grid = 1;
  for (auto [extent, size] : llvm::zip(domain, tile))
    grid *= extent / size;
  return grid;
}

DispatchPlan planDispatch(ArrayRef<Operation *> steps, ArrayRef<int64_t> domain,
                          ArrayRef<int64_t> tile) {
  DispatchPlan plan;
  plan.domain.assign(domain.begin(), domain.end());
  plan.tile.assign(tile.begin(), tile.end());
  SmallVector<Access> memberAccesses, deferred;
  auto defer = [&](Operation *step, bool combine) {
    plan.rest.push_back(step);
    plan.restIsCombine.push_back(combine);
    auto nest = dyn_cast<linalg::LinalgOp>(step);
    llvm::append_range(deferred, !nest     ? opaqueAccesses()
                                 : combine ? combineAccesses(nest)
                                           : accessesOf(nest, false));
  };
  for (Operation *step : steps) {
    auto nest = dyn_cast<linalg::LinalgOp>(step);
    if (!nest) {
      // Runs as written: only in a dispatch of one workgroup, in order.
      if (plan.gridSize() == 1 && deferred.empty()) {
        plan.members.push_back({step, false});
        llvm::append_range(memberAccesses, opaqueAccesses());
      } else {
        defer(step, /*combine=*/false);
      }
      continue;
    }
    Fit fit = fits(nest, plan);
    SmallVector<Access> accesses;
    if (fit != Fit::No) {
      accesses = accessesOf(nest, fit == Fit::Partial);
      bool clash = overlaps(accesses, deferred);
      for (auto [index, a] : llvm::enumerate(accesses)) {
        for (const Access &b : memberAccesses)
          clash = clash || conflicts(a, b, plan);
        for (const Access &b : ArrayRef(accesses).drop_front(index + 1))
          clash = clash || conflicts(a, b, plan);
      }
      if (clash)
        fit = Fit::No;
    }
    if (fit == Fit::No) {
      SmallVector<Access> all = accessesOf(nest, false);
      if (!overlaps(all, memberAccesses) && !overlaps(all, deferred))
        plan.hoisted.push_back(nest);
      else
        defer(nest, /*combine=*/false);
      continue;
    }
    plan.members.push_back({nest, fit == Fit::Partial});
    llvm::append_range(memberAccesses, accesses);
    if (fit == Fit::Partial)
      defer(nest, /*combine=*/true);
  }
  return plan;
}

/// Whether `nest` reduces any of its first `rank` loops (the domain's).
static bool reducesDomainLoops(linalg::LinalgOp nest, size_t rank) {
  SmallVector<utils::IteratorType> iterators = nest.getIteratorTypesArray();
  return llvm::any_of(ArrayRef(iterators).take_front(rank),
                      [](utils::IteratorType it) {
                        return it == utils::IteratorType::reduction;
                      });
}

/// How many of `plan`'s loop nests reduce domain dimensions.
static int64_t reducingMembers(const DispatchPlan &plan) {
  return llvm::count_if(plan.members, [&](const DispatchPlan::Member &m) {
    auto nest = dyn_cast<linalg::LinalgOp>(m.step);
    return nest && reducesDomainLoops(nest, plan.domain.size());
  });
}

SmallVector<int64_t> chooseTile(ArrayRef<int64_t> domain, int64_t work,
                                const GridLimits &limits) {
  SmallVector<int64_t> tile(domain.begin(), domain.end());
  int64_t remaining =
      std::clamp<int64_t>(work / limits.minWork, 1, limits.maxGrid);
  for (unsigned dim = 0; dim < domain.size() && remaining > 1; ++dim) {
    int64_t pieces = std::min(remaining, domain[dim]);
    while (domain[dim] % pieces != 0)
      --pieces;
    tile[dim] = domain[dim] / pieces;
    remaining = (remaining + pieces - 1) / pieces;
  }
  return tile;
}

DispatchPlan chooseDispatch(ArrayRef<Operation *> steps,
                            const GridLimits &limits) {
  // Candidate domains: every prefix of every nest's loops (a nest before
  // the main loop, such as a fill of its output, may move ahead of it).
  SmallVector<SmallVector<int64_t>> domains = {{}};
  for (Operation *step : steps)
    if (auto nest = dyn_cast<linalg::LinalgOp>(step)) {
      SmallVector<int64_t> extents = nest.getStaticLoopRanges();
      for (unsigned rank = 1; rank <= extents.size(); ++rank) {
        SmallVector<int64_t> domain(extents.begin(), extents.begin() + rank);
        if (!llvm::is_contained(domains, domain))
          domains.push_back(domain);
      }
    }
  int64_t work = 0;
  for (Operation *step : steps)
    work = std::max(work, volume(step));
  DispatchPlan best;
  double bestCost = 0;
  for (ArrayRef<int64_t> domain : domains) {
    DispatchPlan plan =
        planDispatch(steps, domain, chooseTile(domain, work, limits));
    if (plan.members.empty())
      continue;
    // Time on kNominalWorkers: members at this grid's parallelism, the
    // others at what a dispatch of their own would get, and more.
    auto alone = [&](Operation *step) {
      int64_t grid =
          std::clamp<int64_t>(volume(step) / limits.minWork, 1, limits.maxGrid);
      return kDeferredFactor * volume(step) /
             static_cast<double>(std::min(grid, kNominalWorkers));
    };
    double parallel =
        static_cast<double>(std::min(plan.gridSize(), kNominalWorkers));
    double cost = 0;
    for (const DispatchPlan::Member &member : plan.members)
      cost += volume(member.step) / parallel;
    for (auto [step, combine] : llvm::zip(plan.rest, plan.restIsCombine))
      if (!combine)
        cost += alone(step);
    for (Operation *step : plan.hoisted)
      cost += alone(step);
    // Ties (small kernels, whose every grid is one workgroup) go to the
    // domain that describes the kernel best: not empty, reducing the
    // fewest of its nests' loops (a norm's domain is its rows), longest.
    auto tieKey = [](const DispatchPlan &p) {
      return std::make_tuple(p.domain.empty(), reducingMembers(p),
                             -static_cast<int64_t>(p.domain.size()));
    };
    if (best.members.empty() || cost < bestCost ||
        (cost == bestCost && tieKey(plan) < tieKey(best))) {
      best = std::move(plan);
      bestCost = cost;
    }
  }
  return best;
}

meg::KernelStrategyKind classify(const DispatchPlan &plan) {
  using meg::KernelStrategyKind;
  if (plan.domain.empty())
    return KernelStrategyKind::serial;
  bool full = false, column = false, row = false;
  for (const DispatchPlan::Member &member : plan.members) {
    auto nest = dyn_cast<linalg::LinalgOp>(member.step);
    if (!nest)
      continue;
    bool reducesDomain = reducesDomainLoops(nest, plan.domain.size());
    if (reducesDomain && nest.getNumParallelLoops() == 0)
      full = true;
    else if (reducesDomain)
      column = true;
    else if (nest.getNumReductionLoops() > 0)
      row = true;
  }
  if (full)
    return KernelStrategyKind::full_reduction;
  if (column)
    return KernelStrategyKind::column_reduction;
  if (row)
    return KernelStrategyKind::row_reduction;
  return KernelStrategyKind::pointwise;
}

} // namespace megc
