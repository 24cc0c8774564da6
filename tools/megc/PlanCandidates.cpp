//===- PlanCandidates.cpp - what `megc plan --gpus` searches over --------===//
//
// The model's facts, a candidate's description, family and gen options,
// and compiling and simulating one (see PlanCandidates.h).
//
//===----------------------------------------------------------------------===//

#include "PlanCandidates.h"
#include "PlanSupport.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace llvm;

namespace megc::search {

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

std::string Candidate::describe() const {
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

/// Generates `options`, compiles it with `recompute` (and each layer's
/// commands captured in CUDA graphs where the cluster's device replays
/// them more cheaply than it launches them) and simulates its train step;
/// the error says why it cannot run.
Expected<Measured> measure(mlir::MLIRContext &context,
                           const gen::GenOptions &options, Recompute recompute,
                           const plan::Cluster &cluster, bool graphs) {
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

} // namespace megc::search
