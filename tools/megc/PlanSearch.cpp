//===- PlanSearch.cpp - `megc plan --gpus N` ------------------------------===//
//
// The search: the layouts (PlanEstimateLayouts.h) estimated on every core,
// each worker compiling in a context of its own; the options that fit by
// the estimate compiled whole in the order of their estimated step, each
// simulated, one variant of each mesh and schedule first (its FSDP
// strategies and HSDP wait), until `top` fit or the next could beat the
// best only if the estimate erred by more than it has on the ones
// compiled; then whatever the search still predicts faster than the best
// (its estimate times the estimate's mean error on its schedule's compiled
// options; one whose schedule's memory estimate fell short on a compiled
// option is held to that shortfall); on a cluster
// whose device replays CUDA graphs cheaply, the best again with them.
// Prints the table (or JSON) and the command lines of the best. Progress
// goes to stderr.
//
//===----------------------------------------------------------------------===//

#include "PlanSearch.h"
#include "PlanCandidates.h"
#include "PlanEstimateLayouts.h"
#include "PlanSupport.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

using namespace llvm;

namespace megc {

using namespace search;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// A compiled candidate.
struct Compiled {
  Candidate candidate;
  Measured measured;
  double perDevice = 0, mfu = 0, compileSeconds = 0;
  /// What the estimate predicts: the step and peak compiled without CUDA
  /// graphs (the measured ones where the candidate has none).
  double plainStepSeconds = 0, plainPeakBytes = 0;
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
  // error larger than any seen so far (at least 5%); the second, whatever
  // (a waiting variant or not) the search still predicts faster than the
  // best's simulated step (its estimate corrected by the estimate's mean
  // error on the compiled ones), so that every option left out is
  // predicted no faster than the best.
  std::vector<Compiled> fitting;
  std::vector<bool> compiled(estimated.size(), false);
  std::set<std::string> familiesFit;
  double largestError = 0.05;
  // The estimate's mean error on the candidates compiled (the geometric
  // mean of simulated over estimated step), and an option's step as the
  // search predicts it: its estimate corrected by that error.
  // The estimate's errors by pipeline schedule (kind and stages a rank):
  // its mean step error (log of simulated over estimated), and the most a
  // compiled option that did not fit needed over its estimated memory,
  // where that was over 1.25 times the estimate.
  struct Errors {
    double logSteps = 0;
    int64_t steps = 0;
    double memory = 1;
  };
  std::map<std::pair<int, int64_t>, Errors> errors;
  Errors allErrors;
  auto errorsOf = [&](const Candidate &candidate) -> const Errors & {
    auto found = errors.find(
        {static_cast<int>(candidate.schedule), candidate.virtualStages});
    return found == errors.end() || found->second.steps == 0 ? allErrors
                                                             : found->second;
  };
  auto bias = [](const Errors &seen) {
    return seen.steps
               ? std::exp(seen.logSteps / static_cast<double>(seen.steps))
               : 1.0;
  };
  auto predicted = [&](const Candidate &candidate) {
    return candidate.estimate.stepSeconds * bias(errorsOf(candidate));
  };
  // The memory an option is expected to need: its estimate times what its
  // schedule's estimate fell short by on a compiled option.
  auto expectedPeak = [&](const Candidate &candidate) {
    auto found = errors.find(
        {static_cast<int>(candidate.schedule), candidate.virtualStages});
    return candidate.estimate.peakBytes() *
           (found == errors.end() ? 1.0 : found->second.memory);
  };
  // Options left out because their schedule's memory estimate proved low.
  size_t memoryRejected = 0;
  auto tooLarge = [&](size_t index) {
    const Candidate &candidate = estimated[index];
    double peak = expectedPeak(candidate);
    if (peak <= request.budget)
      return false;
    compiled[index] = true;
    ++memoryRejected;
    rejected.push_back(
        {candidate.describe(),
         formatv("needs about {0:f2} GB per device: estimated {1:f2}, and "
                 "its schedule's memory estimate was x{2:f2} low on a "
                 "compiled option",
                 peak / 1e9, candidate.estimate.peakBytes() / 1e9,
                 peak / candidate.estimate.peakBytes())});
    return true;
  };
  auto couldBeatBest = [&](const Candidate &candidate) {
    return fitting.empty() ||
           candidate.estimate.stepSeconds * (1 - largestError) <=
               fitting.front().measured.sim.stepSeconds;
  };
  // The longest a candidate's compile and simulation took so far.
  double longestCompile = 0;
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
    longestCompile = std::max(longestCompile, secondsSince(start));
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
    Errors &seen =
        errors[{static_cast<int>(candidate.schedule), candidate.virtualStages}];
    double logError =
        std::log(sim.stepSeconds / candidate.estimate.stepSeconds);
    seen.logSteps += logError, ++seen.steps;
    allErrors.logSteps += logError, ++allErrors.steps;
    errs() << formatv("megc plan:   {0:f1} ms, {1:f2} GB ({2:f0} s)\n",
                      sim.stepSeconds * 1e3, result.measured.peakBytes / 1e9,
                      result.compileSeconds);
    double peak = static_cast<double>(result.measured.peakBytes);
    if (peak > request.budget) {
      // A miss of over a quarter of the estimate is the estimate's model
      // failing for the schedule, not its error near the budget.
      double shortfall = peak / candidate.estimate.peakBytes();
      if (shortfall > 1.25)
        seen.memory = std::max(seen.memory, shortfall);
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
  // With a plan that fits, no compile starts that would end past the time
  // limit, were it to take as long as the longest so far.
  bool timeUp = false;
  auto outOfTime = [&] {
    timeUp =
        timeUp || (!fitting.empty() &&
                   secondsSince(started) + longestCompile > request.timeLimit);
    return timeUp;
  };
  for (size_t index = 0; index < estimated.size(); ++index) {
    if (static_cast<int64_t>(familiesFit.size()) >=
            std::max<int64_t>(request.top, 1) ||
        !couldBeatBest(estimated[index]) || outOfTime())
      break;
    std::string family = familyOf(estimated[index]);
    if (familiesFit.count(family) || tooLarge(index))
      continue;
    if (compileCandidate(index))
      familiesFit.insert(family);
  }
  for (size_t index = 0; index < estimated.size() && !fitting.empty(); ++index)
    if (!compiled[index] &&
        predicted(estimated[index]) <
            fitting.front().measured.sim.stepSeconds &&
        !outOfTime() && !tooLarge(index))
      compileCandidate(index);
  // CUDA graphs: where the cluster's device replays them more cheaply than
  // it launches commands, the best compiled again with each layer's
  // commands in captured graphs; kept where faster and within the budget
  // (graph regions can change the memory plan).
  std::string graphsNote;
  std::optional<double> withGraphs, withoutGraphs;
  if (!fitting.empty() && cluster.efficiency.graphsPay() && !outOfTime()) {
    Compiled &best = fitting.front();
    Candidate graphed = best.candidate;
    graphed.graphs = true;
    errs() << formatv("megc plan: compiling {0} (the best, with CUDA "
                      "graphs)\n",
                      graphed.describe());
    Expected<Measured> measured =
        measure(context, candidateOptions(base, graphed), graphed.recompute,
                cluster, /*graphs=*/true);
    if (!measured) {
      graphsNote = "with CUDA graphs the best does not compile: " +
                   toString(measured.takeError());
    } else {
      double without = best.measured.sim.stepSeconds,
             with = measured->sim.stepSeconds;
      double peak = static_cast<double>(measured->peakBytes);
      withGraphs = with, withoutGraphs = without;
      errs() << formatv("megc plan:   {0:f1} ms, {1:f2} GB\n", with * 1e3,
                        peak / 1e9);
      graphsNote = formatv("CUDA graphs: the best with each layer's commands "
                           "replayed from captured graphs, {0:f2} ms a step "
                           "and {1:f2} GB; issued one by one, {2:f2} ms and "
                           "{3:f2} GB",
                           with * 1e3, peak / 1e9, without * 1e3,
                           best.measured.peakBytes / 1e9);
      if (with < without && peak <= request.budget) {
        best.plainStepSeconds = without;
        best.plainPeakBytes = static_cast<double>(best.measured.peakBytes);
        best.candidate = graphed;
        best.measured = std::move(*measured);
        best.perDevice =
            best.measured.tokens / with / static_cast<double>(request.devices);
        best.mfu = best.measured.sim.modelFlops /
                   (with * cluster.peakFor(best.measured.sim.flopsDtype));
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
  if (!request.traceFile.empty())
    if (Error error =
            writePlanTrace(fitting.front().measured.sim, request.traceFile))
      return planFail(toString(std::move(error)));
  auto estimateError = [](const Compiled &c) {
    return std::make_pair(
        c.candidate.estimate.stepSeconds / (c.plainStepSeconds
                                                ? c.plainStepSeconds
                                                : c.measured.sim.stepSeconds),
        c.candidate.estimate.peakBytes() /
            (c.plainPeakBytes ? c.plainPeakBytes
                              : static_cast<double>(c.measured.peakBytes)));
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
                                   {"time_limit_reached", timeUp},
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
    outs() << formatv(
        "  {0} more fit by the estimate and were not compiled, each "
        "predicted no faster than the best (its estimate times the "
        "estimate's mean error on the compiled ones of its schedule, x{1:f3} "
        "over all; {2} of them another FSDP variant of a layout and schedule "
        "compiled above); the fastest, {3}, estimated {4:f2} ms\n",
        notCompiled, bias(allErrors), siblingsNotCompiled,
        estimated[firstNotCompiled].describe(),
        estimated[firstNotCompiled].estimate.stepSeconds * 1e3);
  if (timeUp)
    outs() << formatv("  the search stopped compiling at its time limit "
                      "({0:f0} s, --time-limit): options it would still have "
                      "compiled are among those not compiled\n",
                      request.timeLimit);
  if (memoryRejected > 0)
    outs() << formatv("  {0} more fit by the estimate but not once their "
                      "schedule's memory estimate proved low on a compiled "
                      "option (rejected below)\n",
                      memoryRejected);
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
