//===- Estimate.cpp - a layout's step and memory from slices --------------===//
//
// Extends the slices' planned time and memory along the layers and the
// micro-batches (see Estimate.h).
//
//===----------------------------------------------------------------------===//

#include "megc/Plan/Estimate.h"

#include <algorithm>

namespace megc::plan {

namespace {

/// f(n, m) = fixed(n) + m * perMicroBatch(n), each linear in the layers n,
/// fitted exactly through the grid's four slices.
struct Bilinear {
  double fixedBase, fixedPerLayer, batchBase, batchPerLayer;

  Bilinear(const SliceGrid &grid, double SliceMeasure::*field) {
    double n = static_cast<double>(grid.layers);
    double f11 = grid.at[0][0].*field, f12 = grid.at[0][1].*field;
    double f21 = grid.at[1][0].*field, f22 = grid.at[1][1].*field;
    // Per micro-batch at n and n + 1 layers, and per step without them.
    double batchAtN = std::max(0.0, f12 - f11);
    double batchAtN1 = std::max(0.0, f22 - f21);
    batchPerLayer = std::max(0.0, batchAtN1 - batchAtN);
    batchBase = batchAtN - batchPerLayer * n;
    double fixedAtN = f11 - batchAtN, fixedAtN1 = f21 - batchAtN1;
    fixedPerLayer = std::max(0.0, fixedAtN1 - fixedAtN);
    fixedBase = fixedAtN - fixedPerLayer * n;
  }
  double fixed(double layers) const {
    return std::max(0.0, fixedBase + fixedPerLayer * layers);
  }
  double perMicroBatch(double layers) const {
    return std::max(0.0, batchBase + batchPerLayer * layers);
  }
};

} // namespace

LayoutEstimate estimateLayout(const SliceGrid &grid, const LayoutShape &shape) {
  double layers = static_cast<double>(shape.layersPerStage);
  double micro = static_cast<double>(shape.microBatches);
  double slots = shape.slots > 0 ? shape.slots : micro;
  LayoutEstimate estimate;
  // A micro-batch slot lasts the compute a micro-batch adds; the rest of
  // a one-micro-batch step (its exposed communication, the optimizer) is
  // per step.
  Bilinear compute(grid, &SliceMeasure::computeSeconds);
  double slot = compute.perMicroBatch(layers);
  auto fixedAt = [&](int extra) {
    const SliceMeasure &one = grid.at[extra][0], &two = grid.at[extra][1];
    return one.stepSeconds -
           std::max(0.0, two.computeSeconds - one.computeSeconds);
  };
  double fixedPerLayer = std::max(0.0, fixedAt(1) - fixedAt(0));
  double fixed = std::max(
      0.0,
      fixedAt(0) + fixedPerLayer * (layers - static_cast<double>(grid.layers)));
  estimate.stepSeconds = fixed + slots * slot;
  Bilinear state(grid, &SliceMeasure::stateBytes);
  estimate.stateBytes = state.fixed(layers) + state.perMicroBatch(layers);
  // The arena: the step's of the stage's layers (what a second
  // micro-batch adds, the accumulated gradients and the weights kept
  // gathered over the step, comes once), and the activations each more
  // micro-batch in flight keeps: per layer, what the forward of one
  // micro-batch holds for its backward.
  const SliceMeasure &one = grid.at[0][0], &next = grid.at[1][0];
  double perLayer = std::max(0.0, next.arenaBytes - one.arenaBytes);
  double base = std::max(0.0, one.arenaBytes -
                                  perLayer * static_cast<double>(grid.layers));
  Bilinear arena(grid, &SliceMeasure::arenaBytes);
  double held = std::max(0.0, next.heldBytes - one.heldBytes);
  double stepArena =
      base + perLayer * layers +
      (shape.microBatches > 1 ? arena.perMicroBatch(layers) : 0.0);
  estimate.arenaBytes =
      stepArena + held * layers * std::max(0.0, shape.inFlight - 1);
  return estimate;
}

} // namespace megc::plan
