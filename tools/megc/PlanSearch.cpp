//===- PlanSearch.cpp - `megc plan --gpus N` ------------------------------===//
//
// Enumerates the layouts of N devices (pp x dp_outer x dp_shard x ep x cp x
// tp, tp inside a node, ep for a mixture-of-experts model, each FSDP
// strategy and HSDP), and for
// each the recomputation and micro-batch size: every one is estimated from
// compiled slices of itself (the mesh without pp, 1 or 2 layers past the
// model's leading distinct ones, 1 and 2 micro-batches; see
// megc/Plan/Estimate.h), cached by what they share, the layouts shared
// out over the machine's cores (a context each); a layout whose least
// memory (full recomputation, the smallest micro-batch) does not fit
// compiles no other option. The fitting ones are
// compiled whole in the order of their estimated step, each simulated, one
// variant of each mesh and schedule first (its FSDP strategies and HSDP
// wait), until `top` fit or the next could beat the best only if the
// estimate erred by more than it has on the ones compiled; then the best's
// waiting variants that could still beat it. Progress goes to stderr.
//
//===----------------------------------------------------------------------===//

#include "PlanSearch.h"
#include "PlanSupport.h"

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Pipeline/Schedule.h"
#include "megc/Plan/Estimate.h"
#include "megc/Plan/Simulate.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

using namespace llvm;

namespace megc {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// What the search needs of the model: its layers (the first index from
/// which every layer holds as many parameters as the last, so that slices
/// past it grow by equal layers), its global batch and sequence, whether
/// it routes experts.
struct ModelFacts {
  int64_t layers = 0, repeatFrom = 0, batch = 0, seq = 0;
  bool moe = false;
};

Expected<ModelFacts> readFacts(mlir::ModuleOp module) {
  ModelFacts facts;
  std::map<int64_t, int64_t> paramsOfLayer;
  for (auto param : module.getOps<mlir::meg::ParamOp>())
    if (auto layer = param->getAttrOfType<mlir::IntegerAttr>(
            mlir::meg::MegDialect::kLayerAttrName))
      paramsOfLayer[layer.getInt()] +=
          cast<mlir::ShapedType>(param.getType()).getNumElements();
  module->walk([&](mlir::meg::MoeRouteOp) { facts.moe = true; });
  if (paramsOfLayer.empty())
    return createStringError("--gpus needs a model whose layers are recorded "
                             "(meg.layer on its parameters)");
  facts.layers = paramsOfLayer.rbegin()->first + 1;
  int64_t last = paramsOfLayer.rbegin()->second;
  facts.repeatFrom = facts.layers - 1;
  while (facts.repeatFrom > 0 && paramsOfLayer.count(facts.repeatFrom - 1) &&
         paramsOfLayer[facts.repeatFrom - 1] == last)
    --facts.repeatFrom;
  // The tokens: the first entry's first integer input, batch by sequence.
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    for (mlir::Type type : func.getArgumentTypes()) {
      auto tensor = dyn_cast<mlir::RankedTensorType>(type);
      if (tensor && tensor.getRank() == 2 &&
          tensor.getElementType().isInteger()) {
        facts.batch = tensor.getDimSize(0), facts.seq = tensor.getDimSize(1);
        break;
      }
    }
    if (facts.batch)
      break;
  }
  if (!facts.batch)
    return createStringError("--gpus plans a language model: the model has "
                             "no batch of token ids");
  return facts;
}

/// The most layer passes (layers times micro-batches) a step the search
/// compiles may run: its compile time grows with them (about a minute at
/// this size on one core).
constexpr int64_t kMostLayerPasses = 4096;

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

  std::string describe() const {
    std::string text = layout.mesh().empty() ? "one rank" : layout.mesh();
    if (layout.pp > 1)
      text += " " + pipeline::scheduleName(schedule).str();
    if (virtualStages > 1)
      text += " V=" + std::to_string(virtualStages);
    if (microBatches > 1)
      text += " M=" + std::to_string(microBatches);
    if (!layout.fsdp.empty())
      text += " fsdp " + layout.fsdp;
    if (layout.tp > 1)
      text += " sp";
    if (recompute == Recompute::Selective)
      text += " recompute selective";
    if (recompute == Recompute::Full)
      text += " recompute full";
    if (graphs)
      text += " cuda-graphs";
    return text;
  }
};

/// A candidate's family: its devices' arrangement and pipeline schedule,
/// whatever its FSDP strategy or HSDP split of the data-parallel ranks.
std::string familyOf(const Candidate &candidate) {
  Layout devices = candidate.layout;
  devices.dp *= devices.outer;
  devices.outer = 1;
  return formatv("{0}|{1}|{2}", devices.mesh(),
                 static_cast<int>(candidate.schedule), candidate.virtualStages);
}

/// The gen flags of `candidate`'s pipeline schedule.
std::string pipelineFlags(const Candidate &candidate) {
  std::string flags =
      " --pp-schedule " + pipeline::scheduleName(candidate.schedule).str();
  if (candidate.virtualStages > 1)
    flags += " --pp-virtual " + std::to_string(candidate.virtualStages);
  return flags;
}

/// The gen options of `layout` (with or without its pipeline axis).
gen::GenOptions optionsFor(const gen::GenOptions &base, const Layout &layout,
                           bool pipeline) {
  gen::GenOptions options = base;
  std::string mesh = layout.mesh(pipeline);
  if (!mesh.empty())
    options.mesh = mesh;
  if (!layout.fsdp.empty())
    options.fsdp = layout.fsdp;
  options.sequenceParallel = layout.tp > 1;
  return options;
}

/// The gen options of `candidate`.
gen::GenOptions candidateOptions(const gen::GenOptions &base,
                                 const Candidate &candidate) {
  gen::GenOptions options = optionsFor(base, candidate.layout, true);
  options.microBatches = candidate.microBatches;
  if (candidate.layout.pp > 1)
    options.ppSchedule = pipeline::scheduleName(candidate.schedule).str();
  if (candidate.virtualStages > 1)
    options.ppVirtual = candidate.virtualStages;
  return options;
}

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
Expected<Measured> measure(mlir::MLIRContext &context,
                           const gen::GenOptions &options, Recompute recompute,
                           const plan::Cluster &cluster, bool graphs = true) {
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      gen::generateModel(context, options);
  if (!module)
    return module.takeError();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(
      &context, [&](mlir::Diagnostic &diagnostic) {
        if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error &&
            diagnostics.empty())
          diagnostics = diagnostic.str();
        return mlir::success();
      });
  CompileOptions compile;
  compile.recompute = recompute;
  if (graphs && cluster.efficiency.graphsPay())
    compile.cudaGraphs = CudaGraphScope::Layer;
  mlir::FailureOr<ProgramDesc> program = compileProgram(**module, compile);
  if (failed(program))
    return createStringError("does not compile: " + diagnostics);
  const EntryDesc *entry = trainStep(*program);
  if (!entry)
    return createStringError("--gpus plans a training model: give the gen "
                             "flags --train");
  Expected<plan::Simulation> sim =
      plan::simulateStep(*program, entry->name, cluster);
  if (!sim)
    return sim.takeError();
  Measured result{std::move(*sim)};
  result.peakBytes = plan::peakBytesPerRank(*program, entry->name);
  result.heldBytes = static_cast<double>(
      plan::largestRank(*program, entry->name)->plan.liveAtLossBytes);
  result.stateBytes = static_cast<double>(program->stateBytes());
  result.tokens = globalTokens(*program, *entry);
  return result;
}

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
  Expected<plan::SliceGrid> grid(mlir::MLIRContext &context,
                                 const Layout &layout, Recompute recompute,
                                 int64_t microBatchSize) {
    std::string key =
        formatv("{0}|{1}|{2}|{3}", layout.mesh(false), layout.fsdp,
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

  std::atomic<size_t> compiled = 0;

  /// Whether the slices capture CUDA graphs.
  bool graphs() const { return cluster.efficiency.graphsPay(); }

private:
  struct Entry {
    plan::SliceGrid grid;
    std::string error;
  };

  Entry compileGrid(mlir::MLIRContext &context, const Layout &layout,
                    Recompute recompute, int64_t microBatchSize) {
    Entry entry;
    entry.grid.layers = facts.repeatFrom + 1;
    for (int64_t extra : {0, 1})
      for (int64_t micro : {1, 2}) {
        gen::GenOptions options = optionsFor(base, layout, false);
        options.layers = entry.grid.layers + extra;
        options.batch = microBatchSize * layout.dataParallel() * micro;
        options.microBatches = micro;
        Expected<Measured> slice =
            measure(context, options, recompute, cluster);
        if (!slice) {
          entry.error = toString(slice.takeError());
          return entry;
        }
        plan::SliceMeasure &at = entry.grid.at[extra][micro - 1];
        at.stepSeconds = slice->sim.stepSeconds;
        at.computeSeconds = slice->sim.computeSeconds;
        at.stateBytes = slice->stateBytes;
        at.arenaBytes =
            static_cast<double>(slice->peakBytes) - slice->stateBytes;
        at.heldBytes = slice->heldBytes;
      }
    return entry;
  }

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
                        mlir::MLIRContext &context) {
  Outcome outcome;
  Candidate tried;
  tried.layout = layout;
  // Where the device replays captured CUDA graphs more cheaply than it
  // launches commands, every option (and its slices) is compiled with each
  // layer's commands in graphs; the search's best is compiled again
  // without them.
  tried.graphs = slices.graphs();
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
      // The heaviest stage, at most: the leading distinct layers (the
      // slices hold them) and an even share of the repeating ones. The
      // estimate extends the slices from there, never below them.
      int64_t repeating = facts.layers - facts.repeatFrom;
      int64_t chunks = layout.pp * schedule.virtualStages;
      shape.layersPerStage = facts.repeatFrom + (repeating + chunks - 1) /
                                                    chunks *
                                                    schedule.virtualStages;
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

/// A compiled candidate.
struct Compiled {
  Candidate candidate;
  Measured measured;
  double perDevice = 0, mfu = 0, compileSeconds = 0;
};

} // namespace

int runSearch(const SearchRequest &request, const plan::Cluster &cluster,
              mlir::MLIRContext &context) {
  Clock::time_point started = Clock::now();
  const gen::GenOptions &base = request.base;
  ModelFacts facts;
  {
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> model =
        gen::generateModel(context, base);
    if (!model)
      return planFail(toString(model.takeError()));
    Expected<ModelFacts> read = readFacts(**model);
    if (!read)
      return planFail(toString(read.takeError()));
    facts = *read;
  }
  // A model its generator lays out over no tensor-parallel group (the
  // error says why) is searched without one.
  bool tensorParallel = true;
  {
    Layout probe;
    probe.tp = 2;
    gen::GenOptions options = optionsFor(base, probe, true);
    options.sequenceParallel = false;
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> model =
        gen::generateModel(context, options);
    if (!model) {
      errs() << "megc plan: searching without tensor parallelism: "
             << toString(model.takeError()) << "\n";
      tensorParallel = false;
    }
  }
  std::vector<Layout> layouts =
      enumerateLayouts(request.devices, facts, cluster, tensorParallel);
  errs() << formatv("megc plan: {0} layouts of {1} devices; estimating each "
                    "from compiled slices ({2} and {3} layers, 1 and 2 "
                    "micro-batches)\n",
                    layouts.size(), request.devices, facts.repeatFrom + 1,
                    facts.repeatFrom + 2);

  // Each layout's fastest fitting option by the estimate, the layouts
  // shared out over the cores, each worker compiling in its own context.
  SliceCache slices(base, facts, cluster);
  std::vector<Outcome> outcomes(layouts.size());
  unsigned workers =
      std::clamp<unsigned>(llvm::hardware_concurrency().compute_thread_count(),
                           1, static_cast<unsigned>(layouts.size()));
  std::atomic<size_t> nextLayout = 0;
  size_t done = 0;
  std::mutex progress;
  Clock::time_point lastReport = Clock::now();
  auto work = [&] {
    mlir::MLIRContext local(context.getDialectRegistry(),
                            mlir::MLIRContext::Threading::DISABLED);
    local.loadAllAvailableDialects();
    for (size_t index; (index = nextLayout++) < layouts.size();) {
      outcomes[index] =
          estimateOptions(layouts[index], facts, request, slices, local);
      std::lock_guard<std::mutex> lock(progress);
      if (++done % 16 == 0 || secondsSince(lastReport) > 10) {
        errs() << formatv("megc plan: estimated {0} of {1} layouts ({2} "
                          "slice sets compiled, {3:f0} s)\n",
                          done, layouts.size(), slices.compiled.load(),
                          secondsSince(started));
        lastReport = Clock::now();
      }
    }
  };
  {
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < workers; ++i)
      threads.emplace_back(work);
    work();
    for (std::thread &thread : threads)
      thread.join();
  }
  std::vector<Candidate> estimated;
  std::vector<std::pair<std::string, std::string>> rejected;
  double smallestNeed = HUGE_VAL;
  std::string smallestLayout;
  size_t layoutsFitting = 0;
  for (Outcome &outcome : outcomes) {
    if (!outcome.best.empty()) {
      llvm::append_range(estimated, outcome.best);
      ++layoutsFitting;
      continue;
    }
    if (outcome.need < smallestNeed)
      smallestNeed = outcome.need, smallestLayout = outcome.layout;
    rejected.push_back({outcome.layout, outcome.why});
  }
  errs() << formatv("megc plan: {0} of {1} layouts fit by the estimate, "
                    "{2} options with their pipeline schedules ({3} slice "
                    "sets compiled, {4:f0} s)\n",
                    layoutsFitting, layouts.size(), estimated.size(),
                    slices.compiled.load(), secondsSince(started));
  llvm::stable_sort(estimated, [](const Candidate &a, const Candidate &b) {
    return a.estimate.stepSeconds < b.estimate.stepSeconds;
  });

  // Compile the candidates in that order. A mesh's FSDP variants (each
  // strategy, HSDP) and a pipeline's schedule are one family: once one
  // variant of a family fits, its siblings wait, so that `top` fills with
  // distinct layouts. The first pass stops when `top` families fit or the
  // next candidate could be faster than the best only by an estimate
  // error larger than any seen so far (at least 5%); the second compiles
  // the best family's waiting siblings that could still beat it by that
  // error.
  std::vector<Compiled> fitting;
  std::vector<bool> compiled(estimated.size(), false);
  std::set<std::string> familiesFit;
  double largestError = 0.05;
  auto couldBeatBest = [&](const Candidate &candidate) {
    return fitting.empty() ||
           candidate.estimate.stepSeconds * (1 - largestError) <=
               fitting.front().measured.sim.stepSeconds;
  };
  // Compiles and simulates `estimated[index]`: true where it fits.
  auto compileCandidate = [&](size_t index) {
    const Candidate &candidate = estimated[index];
    compiled[index] = true;
    errs() << formatv("megc plan: compiling {0} (estimated {1:f1} ms, "
                      "{2:f2} GB)\n",
                      candidate.describe(),
                      candidate.estimate.stepSeconds * 1e3,
                      candidate.estimate.peakBytes() / 1e9);
    Clock::time_point start = Clock::now();
    Expected<Measured> measured =
        measure(context, candidateOptions(base, candidate), candidate.recompute,
                cluster, candidate.graphs);
    if (!measured) {
      rejected.push_back(
          {candidate.describe(), toString(measured.takeError())});
      return false;
    }
    Compiled result{candidate, std::move(*measured)};
    result.compileSeconds = secondsSince(start);
    const plan::Simulation &sim = result.measured.sim;
    result.perDevice = result.measured.tokens / sim.stepSeconds /
                       static_cast<double>(request.devices);
    result.mfu =
        sim.modelFlops / (sim.stepSeconds * cluster.peakFor(sim.flopsDtype));
    largestError = std::max(
        largestError,
        std::abs(candidate.estimate.stepSeconds / sim.stepSeconds - 1));
    errs() << formatv("megc plan:   {0:f1} ms, {1:f2} GB ({2:f0} s)\n",
                      sim.stepSeconds * 1e3, result.measured.peakBytes / 1e9,
                      result.compileSeconds);
    double peak = static_cast<double>(result.measured.peakBytes);
    if (peak > request.budget) {
      rejected.push_back(
          {candidate.describe(),
           formatv("compiled, needs {0:f2} GB per device (estimated {1:f2})",
                   peak / 1e9, candidate.estimate.peakBytes() / 1e9)});
      if (peak < smallestNeed)
        smallestNeed = peak, smallestLayout = candidate.describe();
      return false;
    }
    fitting.push_back(std::move(result));
    llvm::stable_sort(fitting, [](const Compiled &a, const Compiled &b) {
      return a.measured.sim.stepSeconds < b.measured.sim.stepSeconds;
    });
    return true;
  };
  for (size_t index = 0; index < estimated.size(); ++index) {
    if (static_cast<int64_t>(familiesFit.size()) >=
            std::max<int64_t>(request.top, 1) ||
        !couldBeatBest(estimated[index]))
      break;
    std::string family = familyOf(estimated[index]);
    if (familiesFit.count(family))
      continue;
    if (compileCandidate(index))
      familiesFit.insert(family);
  }
  if (!fitting.empty()) {
    std::string best = familyOf(fitting.front().candidate);
    for (size_t index = 0; index < estimated.size(); ++index)
      if (!compiled[index] && familyOf(estimated[index]) == best &&
          couldBeatBest(estimated[index]))
        compileCandidate(index);
  }
  // CUDA graphs against issuing each command alone: the best compiled
  // again without graphs; the faster stays.
  std::string graphsNote;
  std::optional<double> withGraphs, withoutGraphs;
  if (!fitting.empty() && fitting.front().candidate.graphs) {
    Compiled &best = fitting.front();
    Candidate plain = best.candidate;
    plain.graphs = false;
    errs() << formatv("megc plan: compiling {0} (the best, without CUDA "
                      "graphs)\n",
                      plain.describe());
    Expected<Measured> measured =
        measure(context, candidateOptions(base, plain), plain.recompute,
                cluster, /*graphs=*/false);
    if (!measured) {
      graphsNote = "without CUDA graphs it does not compile: " +
                   toString(measured.takeError());
    } else {
      double with = best.measured.sim.stepSeconds,
             without = measured->sim.stepSeconds;
      withGraphs = with, withoutGraphs = without;
      errs() << formatv("megc plan:   {0:f1} ms, {1:f2} GB\n", without * 1e3,
                        measured->peakBytes / 1e9);
      graphsNote = formatv("CUDA graphs: each layer's commands replayed from "
                           "captured graphs, {0:f2} ms a step; issued one by "
                           "one, {1:f2} ms",
                           with * 1e3, without * 1e3);
      if (without < with &&
          static_cast<double>(measured->peakBytes) <= request.budget) {
        best.candidate = plain;
        best.measured = std::move(*measured);
        best.perDevice = best.measured.tokens / without /
                         static_cast<double>(request.devices);
        best.mfu = best.measured.sim.modelFlops /
                   (without * cluster.peakFor(best.measured.sim.flopsDtype));
      }
    }
  }
  // What was not compiled: variants of a family that fit, and the rest.
  size_t notCompiled = 0, siblingsNotCompiled = 0, firstNotCompiled = 0;
  for (size_t index = estimated.size(); index-- > 0;) {
    if (compiled[index])
      continue;
    ++notCompiled, firstNotCompiled = index;
    if (familiesFit.count(familyOf(estimated[index])))
      ++siblingsNotCompiled;
  }

  if (fitting.empty()) {
    std::string smallest =
        smallestNeed == HUGE_VAL
            ? std::string("none compiled")
            : formatv("the smallest, {0}, needs {1:f2} GB per device",
                      smallestLayout, smallestNeed / 1e9)
                  .str();
    return planFail(formatv("no layout of {0} devices fits {1:f2} GB per "
                            "device ({2} evaluated; {3})",
                            request.devices, request.budget / 1e9,
                            layouts.size(), smallest)
                        .str());
  }
  auto estimateError = [](const Compiled &c) {
    return std::make_pair(c.candidate.estimate.stepSeconds /
                              c.measured.sim.stepSeconds,
                          c.candidate.estimate.peakBytes() /
                              static_cast<double>(c.measured.peakBytes));
  };
  if (request.json) {
    json::Array plans;
    for (const Compiled &c : fitting) {
      auto [timeRatio, memoryRatio] = estimateError(c);
      plans.push_back(json::Object{
          {"layout", c.candidate.describe()},
          {"mesh", c.candidate.layout.mesh()},
          {"micro_batches", c.candidate.microBatches},
          {"cuda_graphs", c.candidate.graphs},
          {"step_s", c.measured.sim.stepSeconds},
          {"tokens_per_s_per_device", c.perDevice},
          {"mfu", c.mfu},
          {"peak_bytes_per_rank", static_cast<int64_t>(c.measured.peakBytes)},
          {"bubble_fraction", c.measured.sim.bubbleFraction},
          {"exposed_comm_s", c.measured.sim.exposedCommSeconds},
          {"estimated_step_s", c.candidate.estimate.stepSeconds},
          {"estimated_peak_bytes", c.candidate.estimate.peakBytes()},
          {"estimate_step_ratio", timeRatio},
          {"estimate_peak_ratio", memoryRatio},
          {"compile_s", c.compileSeconds}});
    }
    json::Array refused;
    for (const auto &[layout, why] : rejected)
      refused.push_back(json::Object{{"layout", layout}, {"why", why}});
    json::Array uncompiled;
    for (auto [index, c] : llvm::enumerate(estimated)) {
      if (compiled[index])
        continue;
      uncompiled.push_back(
          json::Object{{"layout", c.describe()},
                       {"estimated_step_s", c.estimate.stepSeconds},
                       {"estimated_peak_bytes", c.estimate.peakBytes()}});
    }
    outs() << formatv("{0:2}", json::Value(json::Object{
                                   {"cluster", cluster.name},
                                   {"devices", request.devices},
                                   {"budget_bytes", request.budget},
                                   {"evaluated", int64_t(layouts.size())},
                                   {"plans", std::move(plans)},
                                   {"not_compiled", std::move(uncompiled)},
                                   {"rejected", std::move(refused)},
                                   {"best_with_cuda_graphs_step_s",
                                    withGraphs ? json::Value(*withGraphs)
                                               : json::Value(nullptr)},
                                   {"best_without_cuda_graphs_step_s",
                                    withoutGraphs ? json::Value(*withoutGraphs)
                                                  : json::Value(nullptr)},
                                   {"seconds", secondsSince(started)}}))
           << "\n";
    return 0;
  }
  std::string options =
      estimated.size() == layoutsFitting
          ? std::string()
          : formatv(" ({0} options with their pipeline schedules)",
                    estimated.size())
                .str();
  outs() << formatv("{0} devices of {1}, {2:f2} GB each: {3} layouts "
                    "evaluated, {4} fit by the estimate{5}, {6} compiled fit "
                    "({7:f0} s)\n",
                    request.devices, cluster.name, request.budget / 1e9,
                    layouts.size(), layoutsFitting, options, fitting.size(),
                    secondsSince(started));
  outs() << formatv("  {0,-56} {1,10} {2,14} {3,6} {4,9} {5,10} {6,7} "
                    "{7,9}\n",
                    "layout", "step ms", "tokens/s/dev", "MFU %", "peak GB",
                    "exposed ms", "bubble", "estimate");
  for (const Compiled &c : fitting) {
    auto [timeRatio, memoryRatio] = estimateError(c);
    outs() << formatv("  {0,-56} {1,10:f2} {2,14:f1} {3,6:f1} {4,9:f2} "
                      "{5,10:f2} {6,7:f3} {7,4:f2}/{8,4:f2}\n",
                      c.candidate.describe(), c.measured.sim.stepSeconds * 1e3,
                      c.perDevice, c.mfu * 100, c.measured.peakBytes / 1e9,
                      c.measured.sim.exposedCommSeconds * 1e3,
                      c.measured.sim.bubbleFraction, timeRatio, memoryRatio);
  }
  outs() << "  (estimate: the estimated step and peak over the compiled "
            "ones)\n";
  if (!graphsNote.empty())
    outs() << "  " << graphsNote << "\n";
  if (notCompiled > 0)
    outs() << formatv("  {0} more fit by the estimate and were not compiled "
                      "({1} of them another FSDP variant of a layout and "
                      "schedule compiled above): estimated slower than the "
                      "best by more than the estimate's largest error "
                      "({2:f0}%), or past --top; the fastest, {3}, {4:f2} "
                      "ms\n",
                      notCompiled, siblingsNotCompiled, largestError * 100,
                      estimated[firstNotCompiled].describe(),
                      estimated[firstNotCompiled].estimate.stepSeconds * 1e3);
  // The rejections compiled candidates met first, then the estimate's.
  size_t listed = 0;
  for (const auto &[layout, why] : rejected)
    if (listed++ < 12)
      outs() << formatv("  {0,-56} rejected: {1}\n", layout, why);
  if (rejected.size() > 12)
    outs() << formatv("  ... and {0} more rejected (--json lists each)\n",
                      rejected.size() - 12);
  const Candidate &best = fitting.front().candidate;
  outs() << formatv(
      "best: {0} <your flags>{1}{6}{7}{2}{3} -o model.mlir && megc "
      "model.mlir{4}{8} -o model.megc && mpirun -n {5} megc-run "
      "model.megc ...\n",
      request.genCommand,
      best.layout.mesh().empty() ? "" : " --mesh " + best.layout.mesh(),
      best.layout.fsdp.empty() ? "" : " --fsdp " + best.layout.fsdp,
      best.layout.tp > 1 ? " --sequence-parallel" : "",
      best.recompute == Recompute::Full        ? " --recompute=full"
      : best.recompute == Recompute::Selective ? " --recompute=selective"
                                               : "",
      request.devices,
      best.microBatches > 1
          ? " --micro-batches " + std::to_string(best.microBatches)
          : std::string(),
      best.layout.pp > 1 ? pipelineFlags(best) : std::string(),
      best.graphs ? " --cuda-graphs=layer" : "");
  return 0;
}

} // namespace megc
