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
#include "GenCommand.h"

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
cl::opt<std::string>
    budgetText("budget",
               cl::desc("Memory per device a layout must fit, e.g. 70GiB "
                        "(default: the cluster's device memory)"),
               cl::init(""), cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string>
    clusterFile("cluster",
                cl::desc("Cluster file, or a shipped cluster: h100-sxm, h200, "
                         "a100-80gb, cpu"),
                cl::Required, cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string> entryName("entry",
                               cl::desc("Entry to simulate (default "
                                        "train_step, else the first)"),
                               cl::init(""), cl::sub(planSubCommand()),
                               cl::cat(planCategory));
cl::opt<bool> asJson("json", cl::desc("Print the plan as JSON"),
                     cl::sub(planSubCommand()), cl::cat(planCategory));
cl::opt<std::string> traceOut("trace",
                              cl::desc("Write the simulated step as a Chrome "
                                       "trace (compute and communication)"),
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

int fail(const Twine &message) {
  WithColor::error(errs(), "megc plan") << message << "\n";
  return 1;
}

/// The tokens one step trains on, over every rank: the entry's integer
/// input named input_ids (else its first integer input), global along
/// the batch when the input is split.
double globalTokens(const ProgramDesc &program, const EntryDesc &entry) {
  const TensorSpec *tokens = nullptr;
  for (const TensorSpec &spec : entry.inputs)
    if (spec.type.getElementType().isInteger() &&
        (!tokens || spec.name == "input_ids"))
      tokens = &spec;
  if (!tokens)
    return 0;
  double count = static_cast<double>(tokens->type.getNumElements());
  if (tokens->split >= 0 && program.mesh &&
      static_cast<size_t>(tokens->split) < program.submeshes.size())
    for (const auto &[axis, size] : program.mesh->axes)
      if (llvm::is_contained(program.submeshes[tokens->split], axis))
        count *= static_cast<double>(size);
  return count;
}

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

Error writeTrace(const plan::Simulation &sim, StringRef path) {
  json::Array events;
  for (const plan::SimEvent &event : sim.events)
    events.push_back(
        json::Object{{"name", event.name},
                     {"cat", plan::costClassName(event.cls)},
                     {"ph", "X"},
                     {"ts", event.start * 1e6},
                     {"dur", (event.end - event.start) * 1e6},
                     {"pid", 1},
                     {"tid", event.comm ? 2 : 1},
                     {"args", json::Object{{"command", event.command}}}});
  std::string error;
  auto output = mlir::openOutputFile(path, &error);
  if (!output)
    return createStringError(error);
  output->os() << formatv("{0}", json::Value(json::Object{
                                     {"traceEvents", std::move(events)}}))
               << "\n";
  output->keep();
  return Error::success();
}

/// Compiles `module` with `options` (no code generation) and plans its
/// memory; diagnostics go to `context`'s handler.
mlir::FailureOr<ProgramDesc> compileProgram(mlir::ModuleOp module,
                                            const CompileOptions &options) {
  if (failed(runFrontEnd(module, options)))
    return mlir::failure();
  mlir::FailureOr<ProgramDesc> program = buildProgram(module, options);
  if (failed(program))
    return mlir::failure();
  for (EntryDesc &entry : program->entries)
    planMemory(entry);
  return program;
}

const EntryDesc *trainStep(const ProgramDesc &program) {
  for (const EntryDesc &entry : program.entries)
    if (entry.name == "train_step")
      return &entry;
  return nullptr;
}

std::optional<std::string> given(const cl::opt<std::string> &flag) {
  if (flag.empty())
    return std::nullopt;
  return flag.getValue();
}

/// One layout the search evaluates.
struct Candidate {
  int64_t pp = 1, dp = 1, ep = 1, cp = 1, tp = 1;
  /// With pp: the micro-batches of a step.
  int64_t micro = 1;
  std::string fsdp; // empty: no_shard by default
  Recompute recompute = Recompute::None;

  std::string mesh() const {
    std::string text;
    for (auto [axis, size] : {std::pair<const char *, int64_t>{"pp", pp},
                              {"dp_shard", dp},
                              {"ep", ep},
                              {"cp", cp},
                              {"tp", tp}})
      if (size > 1)
        text += (text.empty() ? "" : ",") + std::string(axis) + "=" +
                std::to_string(size);
    return text;
  }
  std::string describe() const {
    std::string text = mesh().empty() ? "one rank" : mesh();
    if (pp > 1)
      text += " 1f1b M=" + std::to_string(micro);
    if (!fsdp.empty())
      text += " fsdp " + fsdp;
    if (tp > 1)
      text += " sp";
    if (recompute == Recompute::Selective)
      text += " recompute selective";
    if (recompute == Recompute::Full)
      text += " recompute full";
    return text;
  }
};

struct Evaluated {
  Candidate layout;
  plan::Simulation sim;
  double tokens = 0, perDevice = 0, mfu = 0;
  uint64_t peakBytes = 0;
};

/// --gpus: every layout of the devices over pp x dp_shard x ep x cp x tp
/// (tp inside a node; ep for a mixture-of-experts model; pp up to the
/// layers, 1F1B over 4 micro-batches per stage or what the batch splits
/// into), with and without
/// FSDP's full sharding where data is parallel, each with the least
/// recomputation that fits the budget; the ones that fit, fastest first.
int runSearch(const plan::Cluster &cluster, mlir::MLIRContext &context) {
  double budget = cluster.device.memoryBytes;
  if (!budgetText.empty()) {
    Expected<uint64_t> bytes = parseByteSize(budgetText, "--budget");
    if (!bytes)
      return fail(toString(bytes.takeError()));
    budget = static_cast<double>(*bytes);
  }
  gen::GenOptions base = genOptionsFromFlags(given(presetName), given(hfDir));
  if (base.mesh || base.fsdp || base.sequenceParallel)
    return fail("--gpus searches the layouts: leave --mesh, --fsdp and "
                "--sequence-parallel out");
  // Whether the model routes experts (then ep is searched too).
  bool moe = false;
  int64_t layers = 0;
  {
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> one =
        gen::generateModel(context, base);
    if (!one)
      return fail(toString(one.takeError()));
    (**one)->walk([&](mlir::meg::MoeRouteOp) { moe = true; });
    // Its layers, which pipeline stages are cut at (one at least each).
    for (auto param : (**one).getOps<mlir::meg::ParamOp>())
      if (auto layer = param->getAttrOfType<mlir::IntegerAttr>(
              mlir::meg::MegDialect::kLayerAttrName))
        layers = std::max(layers, layer.getInt() + 1);
  }
  int64_t devices = gpus;
  auto divisors = [](int64_t n) {
    std::vector<int64_t> list;
    for (int64_t d = 1; d <= n; ++d)
      if (n % d == 0)
        list.push_back(d);
    return list;
  };
  std::vector<Candidate> layouts;
  for (int64_t pp : divisors(devices))
    for (int64_t tp : divisors(devices / pp)) {
      if (pp > 1 && pp > layers)
        continue;
      if (tp > cluster.node.devices)
        continue;
      for (int64_t cp : divisors(devices / pp / tp))
        for (int64_t ep :
             moe ? divisors(devices / pp / tp / cp) : std::vector<int64_t>{1}) {
          Candidate layout;
          layout.pp = pp, layout.tp = tp, layout.cp = cp, layout.ep = ep;
          layout.dp = devices / pp / tp / cp / ep;
          // A pipeline over 4 micro-batches per stage (1F1B's bubble
          // (P - 1) / (M + P - 1) under a fifth), or as many as the batch
          // splits into.
          layout.micro = pp > 1 ? 4 * pp : base.microBatches.value_or(1);
          layouts.push_back(layout);
          if (layout.dp * cp * ep > 1) {
            layout.fsdp = "optim_grads_params";
            layouts.push_back(layout);
          }
        }
    }
  std::vector<Evaluated> fitting;
  // Per layout that cannot run here: why, and the memory it needs at least.
  std::vector<std::pair<std::string, std::string>> rejected;
  double smallestNeed = HUGE_VAL;
  std::string smallestLayout;
  for (Candidate layout : layouts) {
    // A pipeline's micro-batches: 4 per stage, else the most (at least one
    // per stage) that each data-parallel rank's batch splits into.
    if (layout.pp > 1)
      for (int64_t micro = 4 * layout.pp; micro >= layout.pp; --micro) {
        gen::GenOptions probe = base;
        probe.mesh = layout.mesh();
        probe.microBatches = micro;
        if (!layout.fsdp.empty())
          probe.fsdp = layout.fsdp;
        Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
            gen::generateModel(context, probe);
        if (module) {
          layout.micro = micro;
          break;
        }
        consumeError(module.takeError());
      }
    gen::GenOptions options = base;
    if (!layout.mesh().empty())
      options.mesh = layout.mesh();
    if (!layout.fsdp.empty())
      options.fsdp = layout.fsdp;
    options.sequenceParallel = layout.tp > 1;
    if (layout.pp > 1)
      options.microBatches = layout.micro;
    std::optional<Evaluated> best;
    double need = HUGE_VAL;
    std::string why;
    for (Recompute recompute :
         {Recompute::None, Recompute::Selective, Recompute::Full}) {
      Candidate tried = layout;
      tried.recompute = recompute;
      Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
          gen::generateModel(context, options);
      if (!module) {
        why = toString(module.takeError());
        break;
      }
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
      mlir::FailureOr<ProgramDesc> program = compileProgram(**module, compile);
      if (failed(program)) {
        why = "does not compile: " + diagnostics;
        break;
      }
      const EntryDesc *entry = trainStep(*program);
      if (!entry)
        return fail("--gpus plans a training model: give the gen flags "
                    "--train");
      Expected<plan::Simulation> sim =
          plan::simulateStep(*program, entry->name, cluster);
      if (!sim) {
        why = toString(sim.takeError());
        break;
      }
      Evaluated result{tried, *sim};
      result.peakBytes = plan::peakBytesPerRank(*program, entry->name);
      result.tokens = globalTokens(*program, *entry);
      result.perDevice =
          result.tokens / result.sim.stepSeconds / static_cast<double>(devices);
      result.mfu =
          result.sim.modelFlops /
          (result.sim.stepSeconds * cluster.peakFor(result.sim.flopsDtype));
      need = std::min(need, static_cast<double>(result.peakBytes));
      if (static_cast<double>(result.peakBytes) <= budget) {
        best = result;
        break;
      }
      why = formatv("needs {0:f2} GB per device even with full "
                    "recomputation",
                    need / 1e9)
                .str();
    }
    if (best) {
      fitting.push_back(*best);
      continue;
    }
    if (need < smallestNeed)
      smallestNeed = need, smallestLayout = layout.describe();
    rejected.push_back({layout.describe(), why});
  }
  std::sort(fitting.begin(), fitting.end(),
            [](const Evaluated &a, const Evaluated &b) {
              return a.sim.stepSeconds < b.sim.stepSeconds;
            });
  if (fitting.empty()) {
    std::string smallest =
        smallestNeed == HUGE_VAL
            ? std::string("none compiled")
            : formatv("the smallest, {0}, needs {1:f2} GB per device",
                      smallestLayout, smallestNeed / 1e9)
                  .str();
    return fail(formatv("no layout of {0} devices fits {1:f2} GB per "
                        "device ({2} evaluated; {3})",
                        devices, budget / 1e9, layouts.size(), smallest)
                    .str());
  }
  size_t shown = std::min<size_t>(fitting.size(), std::max<int64_t>(top, 1));
  if (asJson) {
    json::Array plans;
    for (const Evaluated &e : ArrayRef(fitting).take_front(shown))
      plans.push_back(json::Object{
          {"layout", e.layout.describe()},
          {"mesh", e.layout.mesh()},
          {"step_s", e.sim.stepSeconds},
          {"tokens_per_s_per_device", e.perDevice},
          {"mfu", e.mfu},
          {"peak_bytes_per_rank", static_cast<int64_t>(e.peakBytes)},
          {"bubble_fraction", e.sim.bubbleFraction},
          {"exposed_comm_s", e.sim.exposedCommSeconds}});
    json::Array refused;
    for (const auto &[layout, why] : rejected)
      refused.push_back(json::Object{{"layout", layout}, {"why", why}});
    outs() << formatv("{0:2}", json::Value(json::Object{
                                   {"cluster", cluster.name},
                                   {"devices", devices},
                                   {"budget_bytes", budget},
                                   {"evaluated", int64_t(layouts.size())},
                                   {"plans", std::move(plans)},
                                   {"rejected", std::move(refused)}}))
           << "\n";
    return 0;
  }
  outs() << formatv("{0} devices of {1}, {2:f2} GB each: {3} layouts "
                    "evaluated, {4} fit\n",
                    devices, cluster.name, budget / 1e9, layouts.size(),
                    fitting.size());
  outs() << formatv("  {0,-48} {1,10} {2,14} {3,6} {4,9} {5,10} {6,7}\n",
                    "layout", "step ms", "tokens/s/dev", "MFU %", "peak GB",
                    "exposed ms", "bubble");
  for (const Evaluated &e : ArrayRef(fitting).take_front(shown))
    outs() << formatv("  {0,-48} {1,10:f2} {2,14:f1} {3,6:f1} {4,9:f2} "
                      "{5,10:f2} {6,7:f3}\n",
                      e.layout.describe(), e.sim.stepSeconds * 1e3, e.perDevice,
                      e.mfu * 100, e.peakBytes / 1e9,
                      e.sim.exposedCommSeconds * 1e3, e.sim.bubbleFraction);
  for (const auto &[layout, why] : rejected)
    outs() << formatv("  {0,-48} rejected: {1}\n", layout, why);
  const Candidate &best = fitting.front().layout;
  std::string gen = hfDir.empty() ? "megc gen " + presetName.getValue()
                                  : "megc import " + hfDir.getValue();
  outs() << formatv(
      "best: {0} <your flags>{1}{6}{2}{3} -o model.mlir && megc "
      "model.mlir{4} -o model.megc && mpirun -n {5} megc-run "
      "model.megc ...\n",
      gen, best.mesh().empty() ? "" : " --mesh " + best.mesh(),
      best.fsdp.empty() ? "" : " --fsdp " + best.fsdp,
      best.tp > 1 ? " --sequence-parallel" : "",
      best.recompute == Recompute::Full        ? " --recompute=full"
      : best.recompute == Recompute::Selective ? " --recompute=selective"
                                               : "",
      devices,
      best.pp > 1 ? " --micro-batches " + std::to_string(best.micro)
                  : std::string());
  return 0;
}

} // namespace

int runPlan() {
  Expected<plan::Cluster> cluster = plan::loadCluster(clusterFile);
  if (!cluster)
    return fail(toString(cluster.takeError()));
  int sources = !modelFile.empty() + !presetName.empty() + !hfDir.empty();
  if (sources != 1)
    return fail("give the model once: a model file, --preset NAME or --hf "
                "DIR");

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  if (gpus > 0) {
    if (!modelFile.empty())
      return fail("--gpus generates each layout: give the model as --preset "
                  "NAME or --hf DIR with its gen flags");
    return runSearch(*cluster, context);
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
      return fail(toString(generated.takeError()));
    module = std::move(*generated);
  }
  if (!module)
    return error.empty() ? 1 : fail(error);
  CompileOptions options;
  if (failed(runFrontEnd(*module, options)))
    return 1;
  mlir::FailureOr<ProgramDesc> program = buildProgram(*module, options);
  if (failed(program))
    return 1;
  for (EntryDesc &entry : program->entries)
    planMemory(entry);
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
    return fail("the model has no entry '" + entryName + "' (it has " + names +
                ")");
  }

  if (!calibrateFrom.empty()) {
    if (outputFile.empty())
      return fail("--calibrate writes the calibrated cluster: give -o FILE");
    ErrorOr<std::unique_ptr<MemoryBuffer>> trace =
        MemoryBuffer::getFile(calibrateFrom);
    if (!trace)
      return fail("cannot read trace '" + calibrateFrom +
                  "': " + trace.getError().message());
    Expected<plan::Calibration> calibrated = plan::calibrate(
        *cluster, *program, *entry, (*trace)->getBuffer(), calibrateFrom);
    if (!calibrated)
      return fail(toString(calibrated.takeError()));
    for (const std::string &line : calibrated->notes)
      outs() << line << "\n";
    auto output = mlir::openOutputFile(outputFile, &error);
    if (!output)
      return fail(error);
    output->os() << plan::printCluster(calibrated->cluster);
    output->keep();
    *cluster = calibrated->cluster;
  }

  Expected<plan::Simulation> simulated =
      plan::simulateStep(*program, entry->name, *cluster);
  if (!simulated)
    return fail(toString(simulated.takeError()));
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
    if (Error error = writeTrace(sim, traceOut))
      return fail(toString(std::move(error)));

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
  outs() << formatv(
      "  memory per rank {0:f2} MB (arena {1:f2} MB, "
      "parameters and state {2:f2} MB) of {3:f2} GB: {4}\n",
      peakBytes / 1e6, entry->plan.arenaBytes / 1e6,
      program->stateBytes(entry->pipelineRank) / 1e6,
      cluster->device.memoryBytes / 1e9,
      headroom >= 0
          ? formatv("{0:f2} GB free", headroom / 1e9).str()
          : formatv("does not fit, {0:f2} GB over", -headroom / 1e9).str());
  outs() << formatv("  sent per rank {0:f3} MB a step\n", sim.bytesSent / 1e6);
  return 0;
}

} // namespace megc
