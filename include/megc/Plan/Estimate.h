//===- Estimate.h - a layout's step and memory from slices ------*- C++ -*-===//
//
// The planner's fast estimator: a layout's step time and per-rank memory
// extrapolated from what the compiler plans for small slices of the same
// layout (the mesh without its pipeline axis, the same FSDP strategy,
// recomputation and micro-batch size, with n and n + 1 transformer layers
// and one and two micro-batches). Time and memory are linear in the layers
// and in the micro-batches of a step; a pipeline stage holds its share of
// the layers, keeps its schedule's micro-batches' activations in flight and
// runs its schedule's makespan of micro-batch slots (1F1B: up to P
// micro-batches in flight, M + P - 1 slots). The search compiles the
// layouts this ranks first and reports the estimate's error against them.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_PLAN_ESTIMATE_H
#define MEGC_PLAN_ESTIMATE_H

#include <cstdint>

namespace megc::plan {

/// What the compiler planned for one slice: its simulated step and one
/// rank's memory.
struct SliceMeasure {
  double stepSeconds = 0;
  /// Of the step, the compute stream's busy time: what one more
  /// micro-batch adds at least (its communication may overlap, and the
  /// simulated overlap of one or two micro-batches does not extend).
  double computeSeconds = 0;
  /// The entry's arena and the parameters and state a rank holds.
  double arenaBytes = 0, stateBytes = 0;
  /// Of the arena, what is live when the loss is written (with one
  /// micro-batch: the activations the forward keeps for the backward).
  double heldBytes = 0;
};

/// Slices at `layers` and `layers + 1` transformer layers (the first index)
/// and one and two micro-batches a step (the second).
struct SliceGrid {
  int64_t layers = 1;
  SliceMeasure at[2][2];
};

/// The layout the slices stand for.
struct LayoutShape {
  /// Of the heaviest stage (all the layers without a pipeline); at least
  /// the slices' layers, whose leading distinct ones the estimate counts.
  int64_t layersPerStage = 1;
  /// Micro-batches a step runs (per data-parallel rank).
  int64_t microBatches = 1;
  /// How long the step's micro-batch passes take, in units of one
  /// micro-batch's forward and backward on the stage: the micro-batches
  /// without a pipeline; a pipeline's makespan under its schedule (1F1B:
  /// M + P - 1); 0 reads as the micro-batches.
  double slots = 0;
  /// Micro-batches whose activations the stage keeps at once, in units of
  /// a whole stage's (1F1B: up to the stages; an interleaved rank's chunks
  /// count by their share of its layers); 1 without a pipeline.
  double inFlight = 1;
};

struct LayoutEstimate {
  double stepSeconds = 0;
  double arenaBytes = 0, stateBytes = 0;
  double peakBytes() const { return arenaBytes + stateBytes; }
};

/// The step is the per-step part (optimizer, gradient synchronisation) plus
/// `slots` micro-batch slots of the stage's layers, a slot as long as
/// the compute a micro-batch adds; the memory is the
/// stage's parameters and state, and its arena: the slices' arena for the
/// stage's layers and micro-batches, plus `inFlight` - 1 more micro-batches'
/// layer activations (what a layer keeps from its forward to its backward,
/// the slope of `heldBytes` over the layers). Each is the compiler's slices'
/// value extended along its per-layer and per-micro-batch slopes (negative
/// slopes read as zero).
LayoutEstimate estimateLayout(const SliceGrid &grid, const LayoutShape &shape);

} // namespace megc::plan

#endif // MEGC_PLAN_ESTIMATE_H
