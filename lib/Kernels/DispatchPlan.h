//===- DispatchPlan.h - which loop nests share a dispatch grid --*- C++ -*-===//
//
// The analysis behind meg-select-kernel-strategy and
// meg-distribute-workgroups: a bufferized kernel's loop nests, and how a run
// of them splits over one grid of workgroups, each nest either tiled (its
// workgroup's part of the domain) or partial (a reduction over domain
// dimensions, each workgroup reducing its tile into partials that a later
// dispatch combines).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_KERNELS_DISPATCHPLAN_H
#define MEGC_LIB_KERNELS_DISPATCHPLAN_H

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "llvm/Support/Error.h"

namespace megc {

/// The steps of a bufferized kernel, in order: its loop nests (linalg ops)
/// and any other op with effects (a loop of its own, such as a scatter),
/// which runs as written in a dispatch of one workgroup. Allocations, views,
/// globals and constants are not steps.
llvm::SmallVector<mlir::Operation *> kernelSteps(mlir::func::FuncOp kernel);

/// The buffer a value views, through any chain of views (subviews,
/// reshapes).
mlir::Value baseOf(mlir::Value value);

/// The combining operation of a nest that reduces into its one output, and
/// the neutral element its partials start from; failure when the nest has
/// another form.
struct Combiner {
  mlir::Operation *op = nullptr;
  mlir::TypedAttr neutral;
};
mlir::FailureOr<Combiner> matchCombiner(mlir::linalg::LinalgOp nest);

/// How the grid is sized: at least `minWork` iterations per workgroup and
/// at most `maxGrid` workgroups.
struct GridLimits {
  int64_t minWork = 16384;
  int64_t maxGrid = 256;
};

/// The dispatch grid of the CPU.
GridLimits cpuGridLimits();

/// The grid of a target: for the CPU, workgroups of at least 16K
/// iterations and at most 256 of them; for CUDA, blocks of at least their
/// threads' vectors and about as many as the GPU keeps resident. Also the
/// vector width (in 32-bit elements, what every kernel computes in).
struct TargetGrid {
  GridLimits limits;
  int64_t vectorWidth = 1;
};
TargetGrid targetGrid(mlir::meg::TargetAttr target);

/// One dispatch: its domain (the leading loop extents of its nests), the
/// workgroup tile of the domain, and its nests in order.
struct DispatchPlan {
  struct Member {
    /// A loop nest (tiled, or partial), or another step in a dispatch of
    /// one workgroup.
    mlir::Operation *step;
    /// Reduces split domain dimensions: computes partials (see above).
    bool partial = false;
  };
  llvm::SmallVector<int64_t> domain, tile;
  llvm::SmallVector<Member> members;
  /// Nests that do not fit the domain but depend on no member before them:
  /// they run first, in dispatches of their own.
  llvm::SmallVector<mlir::Operation *> hoisted;
  /// The steps left for later dispatches, in order; for each partial
  /// member, the place of its combine is marked by that member's nest.
  llvm::SmallVector<mlir::Operation *> rest;
  llvm::SmallVector<bool> restIsCombine;

  int64_t gridSize() const;
  /// Domain dimensions the tile splits (tile smaller than the extent).
  bool splits(unsigned dim) const { return tile[dim] < domain[dim]; }
};

/// Plans the dispatch over `domain` split by `tile` that starts with
/// steps.front(): every nest that fits joins (any step when the grid is one
/// workgroup), in order, as long as each
/// reads only what its own workgroup wrote before it; a nest that does not
/// fit moves before the dispatch when nothing before it in the dispatch
/// touches what it does, and after it otherwise (with whatever must stay
/// after it).
DispatchPlan planDispatch(llvm::ArrayRef<mlir::Operation *> steps,
                          llvm::ArrayRef<int64_t> domain,
                          llvm::ArrayRef<int64_t> tile);

/// The workgroup tile of `domain` for `work` iterations: outer dimensions
/// split first, by divisors of their extents.
llvm::SmallVector<int64_t> chooseTile(llvm::ArrayRef<int64_t> domain,
                                      int64_t work, const GridLimits &limits);

/// Picks the domain (a prefix of some nest's loops, or none) whose dispatch
/// does the most work in parallel, and plans it.
DispatchPlan chooseDispatch(llvm::ArrayRef<mlir::Operation *> steps,
                            const GridLimits &limits);

/// What the first dispatch of a kernel says about it.
mlir::meg::KernelStrategyKind classify(const DispatchPlan &plan);

} // namespace megc

#endif // MEGC_LIB_KERNELS_DISPATCHPLAN_H
