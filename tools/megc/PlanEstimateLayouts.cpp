//===- PlanEstimateLayouts.cpp - layouts and their estimates -------------===//
//
// Enumerates the layouts of N devices (pp x dp_outer x dp_shard x ep x cp x
// tp, tp inside a node, ep for a mixture-of-experts model, each FSDP
// strategy and HSDP) and estimates each one's options (recomputation,
// micro-batch size, pipeline schedule) from compiled slices of itself; a
// layout whose least memory (full recomputation, the smallest
// micro-batch) does not fit compiles no other option.
//
//===----------------------------------------------------------------------===//

#include "PlanEstimateLayouts.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace llvm;

namespace megc::search {

namespace {

/// The most layer passes (layers times micro-batches) a step the search
/// compiles may run: its compile time grows with them (about a minute at
/// this size on one core).
constexpr int64_t kMostLayerPasses = 4096;

} // namespace

Expected<plan::SliceGrid> SliceCache::grid(mlir::MLIRContext &context,
                                           const Layout &layout,
                                           Recompute recompute,
                                           int64_t microBatchSize) {
  std::string key = formatv("{0}|{1}|{2}|{3}", layout.mesh(false), layout.fsdp,
                            static_cast<int>(recompute), microBatchSize);
  std::shared_future<Entry> entry;
  std::optional<std::promise<Entry>> mine;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = cache.find(key);
    if (found == cache.end()) {
      mine.emplace();
      found = cache.emplace(key, mine->get_future().share()).first;
    }
    entry = found->second;
  }
  if (mine) {
    mine->set_value(compileGrid(context, layout, recompute, microBatchSize));
    ++compiled;
  }
  const Entry &result = entry.get();
  if (!result.error.empty())
    return createStringError(result.error);
  return result.grid;
}

SliceCache::Entry SliceCache::compileGrid(mlir::MLIRContext &context,
                                          const Layout &layout,
                                          Recompute recompute,
                                          int64_t microBatchSize) {
  Entry entry;
  entry.grid.layers = facts.repeatFrom + 1;
  for (int64_t extra : {0, 1})
    for (int64_t micro : {1, 2}) {
      gen::GenOptions options = optionsFor(base, layout, false);
      options.layers = entry.grid.layers + extra;
      options.batch = microBatchSize * layout.dataParallel() * micro;
      options.microBatches = micro;
      Expected<Measured> slice = measure(context, options, recompute, cluster);
      if (!slice) {
        entry.error = toString(slice.takeError());
        return entry;
      }
      plan::SliceMeasure &at = entry.grid.at[extra][micro - 1];
      at.stepSeconds = slice->sim.stepSeconds;
      at.computeSeconds = slice->sim.computeSeconds;
      at.stateBytes = slice->stateBytes;
      at.arenaBytes = static_cast<double>(slice->peakBytes) - slice->stateBytes;
      at.heldBytes = slice->heldBytes;
    }
  return entry;
}

/// The layouts of `devices`: pp up to the layers, tp inside a node (where
/// the model has a tensor-parallel layout), cp
/// keeping at least 2048 tokens of a sequence on each rank, ep dividing
/// what is left (a mixture-of-experts model only), each without FSDP and,
/// where data is parallel, with each FSDP strategy (ZeRO-1, -2 and -3:
/// optim, optim_grads, optim_grads_params) and HSDP (the full sharding
/// inside a node, replicated over dp_outer across nodes).
std::vector<Layout> enumerateLayouts(int64_t devices, const ModelFacts &facts,
                                     const plan::Cluster &cluster,
                                     bool tensorParallel) {
  auto divisors = [](int64_t n) {
    std::vector<int64_t> list;
    for (int64_t d = 1; d <= n; ++d)
      if (n % d == 0)
        list.push_back(d);
    return list;
  };
  std::vector<Layout> layouts;
  for (int64_t pp : divisors(devices))
    for (int64_t tp : divisors(devices / pp)) {
      if ((pp > 1 && pp > facts.layers) || tp > cluster.node.devices ||
          (tp > 1 && !tensorParallel))
        continue;
      for (int64_t cp : divisors(devices / pp / tp)) {
        if (cp > 1 && facts.seq / cp < 2048)
          continue;
        for (int64_t ep : facts.moe ? divisors(devices / pp / tp / cp)
                                    : std::vector<int64_t>{1}) {
          Layout layout;
          layout.pp = pp, layout.tp = tp, layout.cp = cp, layout.ep = ep;
          layout.dp = devices / pp / tp / cp / ep;
          layouts.push_back(layout);
          if (layout.dp * cp * ep == 1)
            continue;
          for (const char *strategy :
               {"optim", "optim_grads", "optim_grads_params"}) {
            layout.fsdp = strategy;
            layouts.push_back(layout);
          }
          // HSDP: the full sharding inside a node, replicated across
          // nodes, where the data-parallel ranks span more than one.
          int64_t inner = layout.dp;
          while (inner > 1 && (layout.dp % inner != 0 ||
                               inner * tp * cp * ep > cluster.node.devices))
            --inner;
          if (inner > 1 && inner < layout.dp) {
            layout.outer = layout.dp / inner, layout.dp = inner;
            layouts.push_back(layout);
          }
        }
      }
    }
  return layouts;
}

/// The schedules of `pp` ranks over `microBatches` (one option without a
/// pipeline): 1F1B, ZB-H1, and interleaved with 2 stages a rank where the
/// micro-batches split over the ranks and every stage gets a layer.
std::vector<PipelineOption> pipelineOptions(int64_t pp, int64_t microBatches,
                                            int64_t layers) {
  if (pp <= 1)
    return {PipelineOption{pipeline::ScheduleKind::OneFOneB, 1,
                           static_cast<double>(microBatches), 1}};
  std::vector<PipelineOption> list;
  auto add = [&](pipeline::ScheduleKind kind, int64_t chunks) {
    double third = 1.0 / 3 / static_cast<double>(chunks);
    pipeline::PassCosts costs{third, third, third, 0};
    Expected<pipeline::Schedule> schedule = pipeline::buildSchedule(
        kind, static_cast<int32_t>(pp), static_cast<int32_t>(chunks),
        static_cast<int32_t>(microBatches), costs);
    if (!schedule) {
      consumeError(schedule.takeError());
      return;
    }
    Expected<pipeline::Timeline> timeline =
        pipeline::simulateSchedule(*schedule, costs);
    if (!timeline) {
      consumeError(timeline.takeError());
      return;
    }
    int32_t held = *llvm::max_element(timeline->peakInFlight);
    list.push_back({kind, chunks, timeline->makespan,
                    static_cast<double>(held) / static_cast<double>(chunks)});
  };
  add(pipeline::ScheduleKind::OneFOneB, 1);
  add(pipeline::ScheduleKind::ZeroBubbleH1, 1);
  if (microBatches % pp == 0 && layers >= 2 * pp)
    add(pipeline::ScheduleKind::Interleaved, 2);
  return list;
}

/// The fastest options of `layout` that fit by the estimate, one per
/// pipeline schedule: the least recomputation any micro-batch size and
/// schedule fits with, and of those sizes the fastest.
Outcome estimateOptions(const Layout &layout, const ModelFacts &facts,
                        const SearchRequest &request, SliceCache &slices,
                        mlir::MLIRContext &context) {
  Outcome outcome;
  Candidate tried;
  tried.layout = layout;
  outcome.layout = tried.describe();
  int64_t ranksPerReplica = layout.dataParallel();
  if (facts.batch % ranksPerReplica != 0) {
    outcome.why = formatv("the batch of {0} does not split over {1} "
                          "data-parallel ranks",
                          facts.batch, ranksPerReplica);
    return outcome;
  }
  int64_t localBatch = facts.batch / ranksPerReplica;
  double need = HUGE_VAL;
  std::string why;
  // Parameters and state do not depend on recomputation or the
  // micro-batch size: where they alone exceed the budget, no other
  // option's slices are compiled.
  bool stateTooLarge = false;
  // The options with `recompute` and micro-batches of `size` sequences
  // (one per pipeline schedule), estimated; none where they cannot run
  // (`why` says so).
  auto options = [&](Recompute recompute,
                     int64_t size) -> std::vector<Candidate> {
    if (localBatch % size != 0 || localBatch / size < layout.pp)
      return {};
    Candidate option = tried;
    option.recompute = recompute;
    option.microBatches = localBatch / size;
    // The step runs every micro-batch's copy of the layers: one too
    // large to compile in the search's time is left out.
    if (facts.layers * option.microBatches > kMostLayerPasses) {
      why = formatv("{0} micro-batches of {1} layers are over the {2} "
                    "layer passes a step the search compiles",
                    option.microBatches, facts.layers, kMostLayerPasses);
      return {};
    }
    Expected<plan::SliceGrid> grid =
        slices.grid(context, layout, recompute, size);
    if (!grid) {
      why = toString(grid.takeError());
      return {};
    }
    std::vector<Candidate> list;
    for (const PipelineOption &schedule :
         pipelineOptions(layout.pp, option.microBatches, facts.layers)) {
      plan::LayoutShape shape;
      // The heaviest stage: an even share of all the layers (the cut
      // balances their work, and the leading distinct ones, which the
      // first stage holds, take their place in its share), at least the
      // slices' layers, from which the estimate extends.
      int64_t chunks = layout.pp * schedule.virtualStages;
      shape.layersPerStage =
          std::max(facts.repeatFrom + 1, (facts.layers + chunks - 1) / chunks *
                                             schedule.virtualStages);
      shape.microBatches = option.microBatches;
      shape.slots = schedule.slots;
      shape.inFlight = schedule.inFlight;
      Candidate scheduled = option;
      scheduled.schedule = schedule.kind;
      scheduled.virtualStages = schedule.virtualStages;
      scheduled.estimate = plan::estimateLayout(*grid, shape);
      need = std::min(need, scheduled.estimate.peakBytes());
      if (scheduled.estimate.stateBytes > request.budget)
        stateTooLarge = true;
      list.push_back(scheduled);
    }
    return list;
  };
  constexpr int64_t kSizes[] = {1, 2, 4};
  // The least memory first, the most recomputation with the smallest
  // micro-batch that runs: where that does not fit, nothing does, and the
  // other options' slices are not compiled (most layouts of a large
  // model).
  bool leastFits = true;
  for (int64_t size : kSizes) {
    std::vector<Candidate> least = options(Recompute::Full, size);
    if (least.empty())
      continue;
    leastFits = llvm::any_of(least, [&](const Candidate &c) {
      return c.estimate.peakBytes() <= request.budget;
    });
    break;
  }
  if (leastFits) {
    for (Recompute recompute :
         {Recompute::None, Recompute::Selective, Recompute::Full}) {
      if (stateTooLarge)
        break;
      // Smallest micro-batches first: a larger one needs more memory, so
      // the first that none of the schedules fits ends the sizes.
      for (int64_t size : kSizes) {
        std::vector<Candidate> list = options(recompute, size);
        if (list.empty())
          continue;
        bool fits = false;
        for (const Candidate &candidate : list) {
          if (candidate.estimate.peakBytes() > request.budget)
            continue;
          fits = true;
          auto same = llvm::find_if(outcome.best, [&](const Candidate &c) {
            return c.schedule == candidate.schedule &&
                   c.virtualStages == candidate.virtualStages;
          });
          if (same == outcome.best.end())
            outcome.best.push_back(candidate);
          else if (candidate.estimate.stepSeconds < same->estimate.stepSeconds)
            *same = candidate;
        }
        if (!fits)
          break;
      }
      if (!outcome.best.empty())
        return outcome;
    }
  }
  if (need < HUGE_VAL) {
    why = stateTooLarge
              ? formatv("needs {0:f2} GB per device by the estimate, its "
                        "parameters and state alone over the budget",
                        need / 1e9)
                    .str()
              : formatv("needs {0:f2} GB per device by the estimate, "
                        "with the most recomputation and the smallest "
                        "micro-batch",
                        need / 1e9)
                    .str();
    outcome.need = need;
  }
  outcome.why = why;
  return outcome;
}

} // namespace megc::search
