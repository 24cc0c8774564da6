//===- PlanCommand.cpp - `megc plan` -------------------------------------===//
//
// Compiles the layout a model file declares (its mesh, tensor, sequence,
// context and expert parallelism, FSDP), as `megc` would, without code
// generation, and plays one rank's step out on a cluster (Simulate.h): the
// step time, tokens per second per device, model FLOP utilisation, each
// rank's planned memory against the device's, and the communication the
// compute stream waits for. --calibrate fits the cluster's efficiencies to
// a megc-run trace of the same artifact and writes the calibrated cluster.
//
//===----------------------------------------------------------------------===//

#include "PlanCommand.h"
#include "CompileCommand.h"
#include "GenCommand.h"
#include "PlanSearch.h"
#include "PlanSupport.h"

#include "megc/Compiler/CompilePipeline.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Plan/Calibrate.h"
#include "megc/Plan/Cluster.h"
#include "megc/Plan/Simulate.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace megc {

cl::SubCommand &planSubCommand() {
  static cl::SubCommand command(
      "plan", "Simulate a model's compiled step on a cluster");
  return command;
}

namespace {

cl::OptionCategory planCategory("megc plan options");

cl::opt<std::string> modelFile(cl::Positional, cl::Optional,
                               cl::desc("<model.mlir>"),
                               cl::sub(planSubCommand()),
                               cl::cat(planCategory));
cl::opt<std::string>
    presetName("preset",
               cl::desc("Generate the model as `megc gen PRESET` with the "
                        "gen flags given (each layout evaluated)"),
               cl::init(""), cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string>
    hfDir("hf",
          cl::desc("Generate the model as `megc import DIR` with the flags "
                   "given (each layout evaluated)"),
          cl::init(""), cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<int64_t> gpus("gpus",
                      cl::desc("Search the layouts of this many devices "
                               "(with --preset or --hf): dp_shard x ep x cp "
                               "x tp, FSDP, recomputation"),
                      cl::init(0), cl::sub(planSubCommand()),
                      cl::cat(planCategory));
cl::opt<int64_t> top("top", cl::desc("Layouts to list (default 5)"),
                     cl::init(5), cl::sub(planSubCommand()),
                     cl::cat(planCategory));
cl::opt<double> timeLimit(
    "time-limit",
    cl::desc("With --gpus: seconds within which the search ends once a "
             "candidate fits: it starts no compile that would end later, "
             "were it as long as the longest so far (default 540)"),
    cl::init(540), cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string>
    budgetText("budget",
               cl::desc("Memory per device a layout must fit, e.g. 70GiB "
                        "(default: the cluster's device memory)"),
               cl::init(""), cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string>
    clusterFile("cluster",
                cl::desc("Cluster file, or a shipped cluster: h100-sxm, h200, "
                         "h800, a100-80gb, cpu"),
                cl::Required, cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string> entryName("entry",
                               cl::desc("Entry to simulate (default "
                                        "train_step, else the first)"),
                               cl::init(""), cl::sub(planSubCommand()),
                               cl::cat(planCategory));
cl::opt<bool> asJson("json", cl::desc("Print the plan as JSON"),
                     cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string> traceOut("trace",
                              cl::desc("Write the simulated step (with "
                                       "--gpus: the best plan's) as a Chrome "
                                       "trace: compute and communication, "
                                       "and a pipeline's ranks"),
                              cl::init(""), cl::sub(planSubCommand()),
                              cl::cat(planCategory));
cl::opt<std::string>
    calibrateFrom("calibrate",
                  cl::desc("Fit the cluster's efficiencies to this megc-run "
                           "--trace of the model's artifact; writes the "
                           "calibrated cluster to -o"),
                  cl::init(""), cl::sub(planSubCommand()),
                  cl::cat(planCategory));
cl::opt<std::string> outputFile("o",
                                cl::desc("With --calibrate: the calibrated "
                                         "cluster file"),
                                cl::init(""), cl::sub(planSubCommand()),
                                cl::cat(planCategory));

int64_t meshRanks(const ProgramDesc &program) {
  int64_t ranks = 1;
  if (program.mesh)
    for (const auto &[axis, size] : program.mesh->axes)
      ranks *= size;
  return ranks;
}

std::string layoutText(const ProgramDesc &program) {
  if (!program.mesh)
    return "one rank";
  std::string text;
  for (const auto &[axis, size] : program.mesh->axes)
    if (size > 1)
      text += (text.empty() ? "" : ",") + axis + "=" + std::to_string(size);
  return text.empty() ? "one rank" : text;
}

std::optional<std::string> given(const cl::opt<std::string> &flag) {
  if (flag.empty())
    return std::nullopt;
  return flag.getValue();
}

} // namespace

int runPlan() {
  Expected<plan::Cluster> cluster = plan::loadCluster(clusterFile);
  if (!cluster)
    return planFail(toString(cluster.takeError()));
  int sources = !modelFile.empty() + !presetName.empty() + !hfDir.empty();
  if (sources != 1)
    return planFail("give the model once: a model file, --preset NAME or --hf "
                    "DIR");

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  if (gpus > 0) {
    if (!modelFile.empty())
      return planFail(
          "--gpus generates each layout: give the model as --preset "
          "NAME or --hf DIR with its gen flags");
    SearchRequest request;
    request.base = genOptionsFromFlags(given(presetName), given(hfDir));
    if (request.base.mesh || request.base.fsdp ||
        request.base.sequenceParallel || request.base.microBatches)
      return planFail("--gpus searches the layouts: leave --mesh, --fsdp, "
                      "--sequence-parallel and --micro-batches out");
    request.genCommand = hfDir.empty() ? "megc gen " + presetName.getValue()
                                       : "megc import " + hfDir.getValue();
    request.devices = gpus;
    request.budget = cluster->device.memoryBytes;
    if (!budgetText.empty()) {
      Expected<uint64_t> bytes = parseByteSize(budgetText, "--budget");
      if (!bytes)
        return planFail(toString(bytes.takeError()));
      request.budget = static_cast<double>(*bytes);
    }
    request.top = top;
    request.json = asJson;
    request.traceFile = traceOut;
    if (timeLimit <= 0)
      return planFail("--time-limit must be a positive number of seconds");
    request.timeLimit = timeLimit;
    return runSearch(request, *cluster, context);
  }
  SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (!modelFile.empty()) {
    module = parseModuleFile(modelFile, sourceMgr, context, error);
  } else {
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> generated = gen::generateModel(
        context, genOptionsFromFlags(given(presetName), given(hfDir)));
    if (!generated)
      return planFail(toString(generated.takeError()));
    module = std::move(*generated);
  }
  if (!module)
    return error.empty() ? 1 : planFail(error);
  // The layout compiled as `megc` would with the compile flags given
  // (--recompute, --memory-budget, ...).
  Expected<CompileOptions> options = compileOptionsFromFlags();
  if (!options)
    return planFail(toString(options.takeError()));
  mlir::FailureOr<ProgramDesc> program = compileProgram(*module, *options);
  if (failed(program))
    return 1;
  const EntryDesc *entry = nullptr;
  for (const EntryDesc &candidate : program->entries)
    if (entryName.empty() ? candidate.name == "train_step"
                          : candidate.name == entryName)
      entry = &candidate;
  if (!entry && entryName.empty() && !program->entries.empty())
    entry = &program->entries.front();
  if (!entry) {
    std::string names;
    for (const EntryDesc &candidate : program->entries)
      names += (names.empty() ? "" : ", ") + candidate.name;
    return planFail("the model has no entry '" + entryName + "' (it has " +
                    names + ")");
  }

  if (!calibrateFrom.empty()) {
    if (outputFile.empty())
      return planFail(
          "--calibrate writes the calibrated cluster: give -o FILE");
    ErrorOr<std::unique_ptr<MemoryBuffer>> trace =
        MemoryBuffer::getFile(calibrateFrom);
    if (!trace)
      return planFail("cannot read trace '" + calibrateFrom +
                      "': " + trace.getError().message());
    Expected<plan::Calibration> calibrated = plan::calibrate(
        *cluster, *program, *entry, (*trace)->getBuffer(), calibrateFrom);
    if (!calibrated)
      return planFail(toString(calibrated.takeError()));
    for (const std::string &line : calibrated->notes)
      outs() << line << "\n";
    auto output = mlir::openOutputFile(outputFile, &error);
    if (!output)
      return planFail(error);
    output->os() << plan::printCluster(calibrated->cluster);
    output->keep();
    *cluster = calibrated->cluster;
  }

  Expected<plan::Simulation> simulated =
      plan::simulateStep(*program, entry->name, *cluster);
  if (!simulated)
    return planFail(toString(simulated.takeError()));
  plan::Simulation &sim = *simulated;
  double tokens = globalTokens(*program, *entry);
  int64_t ranks = meshRanks(*program);
  double perDevice = sim.stepSeconds > 0 ? tokens / sim.stepSeconds / ranks : 0;
  double mfu = sim.stepSeconds > 0
                   ? sim.modelFlops /
                         (sim.stepSeconds * cluster->peakFor(sim.flopsDtype))
                   : 0;
  uint64_t peakBytes = plan::peakBytesPerRank(*program, entry->name);
  double headroom =
      cluster->device.memoryBytes - static_cast<double>(peakBytes);

  if (!traceOut.empty())
    if (Error error = writePlanTrace(sim, traceOut))
      return planFail(toString(std::move(error)));

  if (asJson) {
    json::Object breakdown;
    for (const auto &[cls, seconds] : sim.secondsByClass)
      breakdown[plan::costClassName(cls)] = seconds;
    json::Value result =
        json::Object{{"cluster", cluster->name},
                     {"entry", entry->name},
                     {"layout", layoutText(*program)},
                     {"ranks", ranks},
                     {"step_s", sim.stepSeconds},
                     {"tokens_per_s_per_device", perDevice},
                     {"mfu", mfu},
                     {"peak_bytes_per_rank", static_cast<int64_t>(peakBytes)},
                     {"headroom_bytes", headroom},
                     {"bubble_fraction", sim.bubbleFraction},
                     {"exposed_comm_s", sim.exposedCommSeconds},
                     {"comm_s", sim.commSeconds},
                     {"compute_s", sim.computeSeconds},
                     {"recompute_s", sim.recomputeSeconds},
                     {"bytes_sent_per_rank", sim.bytesSent},
                     {"seconds_by_class", std::move(breakdown)}};
    outs() << formatv("{0:2}", result) << "\n";
    return 0;
  }
  outs() << formatv("{0} on {1}, {2} ({3} rank{4}), entry {5}\n",
                    modelFile.getValue(), cluster->name, layoutText(*program),
                    ranks, ranks == 1 ? "" : "s", entry->name);
  outs() << formatv("  step {0:f3} ms: compute {1:f3} ms (recomputation "
                    "{2:f3} ms), communication {3:f3} ms, of it exposed "
                    "{4:f3} ms\n",
                    sim.stepSeconds * 1e3, sim.computeSeconds * 1e3,
                    sim.recomputeSeconds * 1e3, sim.commSeconds * 1e3,
                    sim.exposedCommSeconds * 1e3);
  if (sim.bubbleFraction > 0)
    outs() << formatv("  pipeline bubble {0:f3} of the step ({1} schedule: "
                      "the slowest rank's wait for its neighbours, each "
                      "rank's passes as long as its program's)\n",
                      sim.bubbleFraction, program->pipeline->schedule);
  outs() << "  by class:";
  for (const auto &[cls, seconds] : sim.secondsByClass)
    outs() << formatv(" {0} {1:f3} ms", plan::costClassName(cls),
                      seconds * 1e3);
  outs() << "\n";
  outs() << formatv("  {0:f0} tokens a step, {1:f1} tokens/s per device, "
                    "MFU {2:f1}% of the {3} peak\n",
                    tokens, perDevice, mfu * 100, sim.flopsDtype);
  // Under a pipeline the ranks differ: the largest one's parts.
  const EntryDesc *largest = plan::largestRank(*program, entry->name);
  outs() << formatv(
      "  memory per rank {0:f2} MB ({5}arena {1:f2} MB, "
      "parameters and state {2:f2} MB) of {3:f2} GB: {4}\n",
      peakBytes / 1e6, largest->plan.arenaBytes / 1e6,
      program->stateBytes(largest->pipelineRank) / 1e6,
      cluster->device.memoryBytes / 1e9,
      headroom >= 0
          ? formatv("{0:f2} GB free", headroom / 1e9).str()
          : formatv("does not fit, {0:f2} GB over", -headroom / 1e9).str(),
      program->pipeline
          ? formatv("the largest, pipeline rank {0}: ", largest->pipelineRank)
                .str()
          : std::string());
  outs() << formatv("  sent per rank {0:f3} MB a step\n", sim.bytesSent / 1e6);
  return 0;
}

} // namespace megc
