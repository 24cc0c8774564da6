//===- PlanCandidates.h - what `megc plan --gpus` searches over -*- C++ -*-===//
//
// The search's vocabulary: the model's facts it needs, a layout (mesh and
// FSDP strategy), a candidate (a layout with its recomputation,
// micro-batches, pipeline schedule, CUDA graphs and estimate), its family
// (the same devices and schedule whatever the FSDP variant), the gen
// options that realise it, and compiling and simulating one.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_PLANCANDIDATES_H
#define MEGC_TOOLS_MEGC_PLANCANDIDATES_H

#include "megc/Compiler/CompileOptions.h"
#include "megc/Gen/Generate.h"
#include "megc/Pipeline/Schedule.h"
#include "megc/Plan/Cluster.h"
#include "megc/Plan/Estimate.h"
#include "megc/Plan/Simulate.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace megc::search {

/// What the search needs of the model: its layers (the first index from
/// which every layer holds as many parameters as the last, so that slices
/// past it grow by equal layers), its global batch and sequence, whether
/// it routes experts.
struct ModelFacts {
  int64_t layers = 0, repeatFrom = 0, batch = 0, seq = 0;
  bool moe = false;
};

/// The facts of `module`; an error where its layers are not recorded or
/// it has no batch of token ids.
llvm::Expected<ModelFacts> readFacts(mlir::ModuleOp module);

/// A mesh and FSDP strategy.
struct Layout {
  /// dp: the data-parallel ranks FSDP shards over (dp_shard), outer: the
  /// replicas of that group (HSDP's dp_outer).
  int64_t pp = 1, outer = 1, dp = 1, ep = 1, cp = 1, tp = 1;
  std::string fsdp; // empty: no_shard

  /// The data-parallel ranks: a step's batch splits over them.
  int64_t dataParallel() const { return outer * dp * ep; }

  /// `--mesh`'s text, with or without the pipeline axis.
  std::string mesh(bool pipeline = true) const {
    std::string text;
    for (auto [axis, size] : {std::pair<const char *, int64_t>{"pp", pp},
                              {"dp_outer", outer},
                              {"dp_shard", dp},
                              {"ep", ep},
                              {"cp", cp},
                              {"tp", tp}})
      if (size > 1 && (pipeline || std::string_view(axis) != "pp"))
        text += (text.empty() ? "" : ",") + std::string(axis) + "=" +
                std::to_string(size);
    return text;
  }
};

/// A layout with its recomputation and micro-batches, and its estimate.
struct Candidate {
  Layout layout;
  Recompute recompute = Recompute::None;
  /// Micro-batches a step runs on each data-parallel rank.
  int64_t microBatches = 1;
  /// With a pipeline: its schedule and each rank's stages.
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
  int64_t virtualStages = 1;
  /// Each layer's commands replayed from captured CUDA graphs.
  bool graphs = false;
  plan::LayoutEstimate estimate;

  /// The candidate in words: its mesh, schedule, micro-batches, FSDP,
  /// recomputation and graphs.
  std::string describe() const;
};

/// A candidate's family: its devices' arrangement and pipeline schedule,
/// whatever its FSDP strategy or HSDP split of the data-parallel ranks.
std::string familyOf(const Candidate &candidate);

/// The gen flags of `candidate`'s pipeline schedule.
std::string pipelineFlags(const Candidate &candidate);

/// The gen options of `layout` (with or without its pipeline axis).
gen::GenOptions optionsFor(const gen::GenOptions &base, const Layout &layout,
                           bool pipeline);

/// The gen options of `candidate`.
gen::GenOptions candidateOptions(const gen::GenOptions &base,
                                 const Candidate &candidate);

/// A compiled and simulated train step.
struct Measured {
  plan::Simulation sim;
  uint64_t peakBytes = 0;
  double stateBytes = 0, heldBytes = 0, tokens = 0;
};

/// Generates `options`, compiles it with `recompute` (and each layer's
/// commands captured in CUDA graphs where the cluster's device replays
/// them more cheaply than it launches them) and simulates its train step;
/// the error says why it cannot run.
llvm::Expected<Measured>
measure(mlir::MLIRContext &context, const gen::GenOptions &options,
        Recompute recompute, const plan::Cluster &cluster, bool graphs = false);

} // namespace megc::search

#endif // MEGC_TOOLS_MEGC_PLANCANDIDATES_H
