//===- PlanEstimateLayouts.h - layouts and their estimates ------*- C++ -*-===//
//
// The layouts of N devices the search covers, the pipeline schedules of
// each, and each layout's fastest options that fit by the estimate from
// compiled slices of itself (megc/Plan/Estimate.h), the slices cached and
// shared by the layouts and the threads that need them.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_PLANESTIMATELAYOUTS_H
#define MEGC_TOOLS_MEGC_PLANESTIMATELAYOUTS_H

#include "PlanCandidates.h"
#include "PlanSearch.h"

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <vector>

namespace megc::search {

/// The slices of layouts, compiled once for every layout that shares them.
/// Safe to call from several threads, each with its own context: a slice
/// set another thread is compiling is waited for, not compiled again.
class SliceCache {
public:
  SliceCache(const gen::GenOptions &base, const ModelFacts &facts,
             const plan::Cluster &cluster)
      : base(base), facts(facts), cluster(cluster) {}

  /// The slices of `layout` without its pipeline axis, with `recompute`
  /// and `microBatchSize` sequences a micro-batch per data-parallel rank,
  /// compiled in `context` if no thread has.
  llvm::Expected<plan::SliceGrid> grid(mlir::MLIRContext &context,
                                       const Layout &layout,
                                       Recompute recompute,
                                       int64_t microBatchSize);

  /// Slice sets compiled so far.
  std::atomic<size_t> compiled = 0;

private:
  struct Entry {
    plan::SliceGrid grid;
    std::string error;
  };

  Entry compileGrid(mlir::MLIRContext &context, const Layout &layout,
                    Recompute recompute, int64_t microBatchSize);

  const gen::GenOptions &base;
  const ModelFacts &facts;
  const plan::Cluster &cluster;
  std::mutex mutex;
  std::map<std::string, std::shared_future<Entry>> cache;
};

/// The layouts of `devices`: pp up to the layers, tp inside a node (where
/// the model has a tensor-parallel layout), cp
/// keeping at least 2048 tokens of a sequence on each rank, ep dividing
/// what is left (a mixture-of-experts model only), each without FSDP and,
/// where data is parallel, with each FSDP strategy (ZeRO-1, -2 and -3:
/// optim, optim_grads, optim_grads_params) and HSDP (the full sharding
/// inside a node, replicated over dp_outer across nodes).
std::vector<Layout> enumerateLayouts(int64_t devices, const ModelFacts &facts,
                                     const plan::Cluster &cluster,
                                     bool tensorParallel);

/// A pipeline schedule the search tries, and what it means for a stage:
/// its makespan in micro-batch slots and the micro-batches' activations it
/// keeps at once (in whole-stage units), from the schedule itself played
/// out with a micro-batch's forward, input-gradient and weight-gradient
/// passes equally long (a transformer layer's three matrix products).
struct PipelineOption {
  pipeline::ScheduleKind kind = pipeline::ScheduleKind::OneFOneB;
  int64_t virtualStages = 1;
  double slots = 0, inFlight = 1;
};

/// The schedules of `pp` ranks over `microBatches` (one option without a
/// pipeline): 1F1B, ZB-H1, and interleaved with 2 stages a rank where the
/// micro-batches split over the ranks and every stage gets a layer.
std::vector<PipelineOption> pipelineOptions(int64_t pp, int64_t microBatches,
                                            int64_t layers);

/// What the estimate made of one layout: its fastest fitting option of
/// each pipeline schedule, or why none fits and the least memory an option
/// needs.
struct Outcome {
  std::vector<Candidate> best;
  std::string layout, why;
  double need = HUGE_VAL;
};

/// The fastest options of `layout` that fit by the estimate, one per
/// pipeline schedule: the least recomputation any micro-batch size and
/// schedule fits with, and of those sizes the fastest.
Outcome estimateOptions(const Layout &layout, const ModelFacts &facts,
                        const SearchRequest &request, SliceCache &slices,
                        mlir::MLIRContext &context);

} // namespace megc::search

#endif // MEGC_TOOLS_MEGC_PLANESTIMATELAYOUTS_H
