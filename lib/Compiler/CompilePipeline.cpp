//===- CompilePipeline.cpp - a model to an artifact, as a library -------===//
//
// Runs the front-end pipeline (inline, RoPE fusion, autodiff and optimizer
// for a training model, FSDP, canonicalize, CSE, fusion, CUDA graph
// outlining), builds the program, compiles the kernels for each target,
// plans the memory and serializes the artifact, or stops at what --emit
// asks for.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/CompilePipeline.h"

#include "megc/Compiler/Program.h"
#include "megc/Conversion/Passes.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/IR/TensorSizes.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"
#include "megc/Dialect/Megrt/Transforms/Passes.h"
#include "megc/Kernels/Passes.h"
#include "megc/Kernels/Pipelines.h"

#include "mlir/InitAllDialects.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace megc {

void registerCompilerDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::meg::MegDialect, rt::MegrtDialect>();
}

void registerCompilerPasses() {
  mlir::registerAllPasses();
  mlir::meg::registerMegConversionPasses();
  mlir::meg::registerMegPasses();
  rt::registerMegrtPasses();
  registerKernelPasses();
  registerKernelPipelines();
  // Every pipeline applies them (timing, IR printing, reproducers), and
  // applying them fails unless they exist.
  mlir::registerPassManagerCLOptions();
}

void buildFrontEndPipeline(mlir::OpPassManager &pm, mlir::ModuleOp module,
                           const CompileOptions &options) {
  // A model with an optimizer configuration trains: its loss gets a
  // gradient function and a training step.
  bool training = module->hasAttr(mlir::meg::MegDialect::kOptimizerAttrName) &&
                  !module.lookupSymbol("train_step");
  bool fsdp = module->hasAttr(mlir::meg::MegDialect::kFsdpAttrName);
  bool pipelined = module->hasAttr(mlir::meg::MegDialect::kPipelineAttrName);
  pm.addPass(mlir::createInlinerPass());
  // Fusion runs before autodiff, so that fused ops get fused gradients;
  // CSE first lets q and k share one pair of tables.
  if (options.fuseRope) {
    pm.addPass(mlir::createCSEPass());
    pm.addNestedPass<mlir::func::FuncOp>(mlir::meg::createMegFuseRope());
  }
  if (options.lossChunks > 1) {
    mlir::meg::MegChunkLossOptions chunks;
    chunks.chunks = options.lossChunks;
    pm.addPass(mlir::meg::createMegChunkLoss(chunks));
  }
  // The layout of one rank (this rank's chunks of every sequence, then its
  // blocks of the tensor-parallel layers, or without tensor parallelism the
  // layers' splits dropped), before autodiff: the collectives they insert
  // have the conjugate gradients.
  pm.addPass(mlir::meg::createMegContextParallel());
  pm.addPass(mlir::meg::createMegTensorParallel());
  // The stages, recorded on every op before autodiff gives each gradient
  // op its forward op's.
  if (pipelined)
    pm.addPass(mlir::meg::createMegPipelineStages());
  if (training)
    pm.addPass(mlir::meg::createMegAutodiff());
  // Ring attention's steps, once autodiff has paired each with its
  // gradient.
  pm.addPass(mlir::meg::createMegRingAttention());
  if (training) {
    pm.addPass(mlir::meg::createMegPrecision());
    pm.addPass(mlir::meg::createMegOptimizer());
  }
  if (fsdp)
    pm.addPass(mlir::meg::createMegFsdp());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createSymbolDCEPass());
  // Each rank's program of every entry, in its schedule's order.
  if (pipelined) {
    pm.addPass(mlir::meg::createMegPipelineSplit());
    pm.addPass(mlir::createCanonicalizerPass());
  }
  // Each update right after its gradient, so that gradients die early.
  if (training)
    pm.addNestedPass<mlir::func::FuncOp>(mlir::meg::createMegScheduleUpdates());
  if (options.fuse)
    pm.addNestedPass<mlir::func::FuncOp>(mlir::meg::createMegFuse());
  // After fusion: the recomputation's copies are the same kernels.
  if (training && (options.recompute != Recompute::None ||
                   options.memoryBudget || options.lossChunks > 1)) {
    mlir::meg::MegRematOptions remat;
    remat.mode = options.recompute == Recompute::Full        ? "full"
                 : options.recompute == Recompute::Selective ? "selective"
                                                             : "none";
    remat.memoryBudget = options.memoryBudget;
    remat.minSteps.assign(options.rematMinSteps.begin(),
                          options.rematMinSteps.end());
    pm.addPass(mlir::meg::createMegRemat(remat));
  }
  // Every attention gradient exists now (recomputed forwards included):
  // each gets its forward's softmax statistics.
  pm.addNestedPass<mlir::func::FuncOp>(
      mlir::meg::createMegKeepAttentionStats());
  if (options.cudaGraphs != CudaGraphScope::None) {
    mlir::meg::MegOutlineCudaGraphsOptions graphs;
    graphs.scope =
        options.cudaGraphs == CudaGraphScope::Step ? "step" : "layer";
    graphs.shareIoBuffers = options.shareIoBuffers;
    graphs.captureCollectives = options.captureCollectives;
    pm.addPass(mlir::meg::createMegOutlineCudaGraphs(graphs));
  }
  // Collectives overlap the work that does not need them (a tensor-parallel
  // layer's weight gradient, an MoE layer's shared experts). After the
  // outlining, so that a collective captured in a graph region starts and
  // is waited for inside it.
  mlir::meg::MegAsyncCollectivesOptions async;
  async.earlyTransfers = options.earlySends;
  pm.addNestedPass<mlir::func::FuncOp>(
      mlir::meg::createMegAsyncCollectives(async));
}

mlir::LogicalResult runPipeline(mlir::ModuleOp module,
                                const mlir::OpPassManager &pipeline) {
  mlir::PassManager pm(module.getContext());
  static_cast<mlir::OpPassManager &>(pm) = pipeline;
  if (failed(mlir::applyPassManagerCLOptions(pm)))
    return mlir::failure();
  return pm.run(module);
}

/// With an optimizer, `grad` and `train_step` name what meg-autodiff and
/// meg-optimizer build (or a user built with them, megc-opt): a function
/// under such a name that is not one would compile to an entry that does not
/// do what its name says.
static mlir::LogicalResult checkReservedEntries(mlir::ModuleOp module) {
  if (!module->hasAttr(mlir::meg::MegDialect::kOptimizerAttrName))
    return mlir::success();
  if (auto step = module.lookupSymbol<mlir::func::FuncOp>("train_step")) {
    bool trains = false;
    step.walk([&](mlir::meg::AdamWOp) { trains = true; });
    if (!trains)
      return step.emitError()
             << "'train_step' is the name of the training step meg-optimizer "
                "builds, but this function updates no parameter (no "
                "meg.adamw); rename it (megc builds train_step from the "
                "function named loss)";
  }
  if (auto grad = module.lookupSymbol<mlir::func::FuncOp>("grad")) {
    bool gradients = false;
    for (unsigned i = 0; i < grad.getNumResults(); ++i)
      gradients |= static_cast<bool>(mlir::meg::gradientParam(grad, i));
    if (!gradients && !module.lookupSymbol("train_step"))
      return grad.emitError()
             << "'grad' is the name of the gradient function meg-autodiff "
                "builds, but no result of this function is a parameter's "
                "gradient (meg.grad_of); rename it";
  }
  return mlir::success();
}

/// The entry whose plan (arena plus parameters and state) needs the most,
/// and what it needs.
static std::pair<const EntryDesc *, uint64_t>
largestPlan(const ProgramDesc &program) {
  const EntryDesc *largest = nullptr;
  uint64_t most = 0;
  for (const EntryDesc &entry : program.entries) {
    uint64_t needs =
        entry.plan.arenaBytes + program.stateBytes(entry.pipelineRank);
    if (!largest || needs > most) {
      largest = &entry;
      most = needs;
    }
  }
  return {largest, most};
}

/// Memory of the largest GPU (a B300's 288 GB), and what no device of any
/// kind holds per rank (1 TiB).
constexpr uint64_t kLargestGpuBytes = 288'000'000'000;
constexpr uint64_t kLargestDeviceBytes = uint64_t(1) << 40;

static std::string megabytes(uint64_t bytes) {
  std::string text;
  raw_string_ostream(text) << format("%.3f MB", bytes / 1e6);
  return text;
}

/// The steps of meg-remat's ladder to take under --memory-budget, per
/// pipeline rank (the first for a program without a pipeline). The pass
/// fits its estimate of the plan's peak into the budget; the compiled plan
/// can be larger (a fragmented arena). Compiles copies of the module, and
/// while a rank's plan does not fit asks that rank's programs for one step
/// more than they took (a rank that fits keeps its steps): the ladder does
/// not depend on the budget, so the steps a budget needs never grow with
/// it, and a budget met is met by every larger one.
static mlir::FailureOr<std::vector<unsigned>>
rematSteps(mlir::ModuleOp module, const CompileOptions &options) {
  CompileOptions probe = options;
  // The probes' remarks say nothing the final compile's do not.
  mlir::ScopedDiagnosticHandler quiet(
      module.getContext(), [](mlir::Diagnostic &diagnostic) {
        return mlir::success(diagnostic.getSeverity() ==
                             mlir::DiagnosticSeverity::Remark);
      });
  // A function's (or entry's) index in the steps: its pipeline rank, or 0.
  auto indexOf = [](int64_t pipelineRank) {
    return static_cast<size_t>(std::max<int64_t>(pipelineRank, 0));
  };
  while (true) {
    mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
    mlir::OpPassManager frontEnd(mlir::ModuleOp::getOperationName());
    buildFrontEndPipeline(frontEnd, *copy, probe);
    if (failed(runPipeline(*copy, frontEnd)))
      return mlir::failure();
    mlir::FailureOr<ProgramDesc> program = buildProgram(*copy, probe);
    if (failed(program))
      return mlir::failure();
    if (failed(planMemory(*program)))
      return mlir::failure();
    // The steps each rank's programs took, of how many.
    std::vector<unsigned> taken, ladder;
    copy->walk([&](mlir::func::FuncOp func) {
      auto steps = func->getAttrOfType<mlir::DenseI64ArrayAttr>(
          mlir::meg::MegDialect::kRematStepsAttrName);
      if (!steps)
        return;
      int64_t rank = -1;
      if (auto attr = func->getAttrOfType<mlir::IntegerAttr>(
              mlir::meg::MegDialect::kPipelineRankAttrName))
        rank = attr.getInt();
      size_t index = indexOf(rank);
      if (index >= taken.size()) {
        taken.resize(index + 1, 0);
        ladder.resize(index + 1, 0);
      }
      taken[index] = std::max(taken[index], static_cast<unsigned>(steps[0]));
      ladder[index] =
          std::max(ladder[index], static_cast<unsigned>(steps[1]));
    });
    bool fits = true;
    for (const EntryDesc &entry : program->entries) {
      uint64_t needed =
          entry.plan.arenaBytes + program->stateBytes(entry.pipelineRank);
      if (needed <= options.memoryBudget)
        continue;
      size_t index = indexOf(entry.pipelineRank);
      if (index >= taken.size() || taken[index] >= ladder[index])
        return module.emitError()
               << "the memory budget of " << megabytes(options.memoryBudget)
               << " per rank is not met: with every layer recomputed, entry '"
               << entry.name << "'"
               << (entry.pipelineRank >= 0
                       ? " of pipeline rank " +
                             std::to_string(entry.pipelineRank)
                       : std::string())
               << " needs " << megabytes(needed) << " (arena "
               << megabytes(entry.plan.arenaBytes) << ", parameters and state "
               << megabytes(program->stateBytes(entry.pipelineRank)) << ")";
      if (probe.rematMinSteps.size() < taken.size())
        probe.rematMinSteps.resize(taken.size(), 0);
      probe.rematMinSteps[index] =
          std::max(probe.rematMinSteps[index], taken[index] + 1);
      fits = false;
    }
    if (fits)
      return taken;
  }
}

mlir::OwningOpRef<mlir::ModuleOp> parseModuleFile(llvm::StringRef path,
                                                  llvm::SourceMgr &sourceMgr,
                                                  mlir::MLIRContext &context,
                                                  std::string &error) {
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(path, &error);
  if (!file)
    return nullptr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
}

mlir::LogicalResult runFrontEnd(mlir::ModuleOp module,
                                const CompileOptions &options) {
  // Before any pass computes with them: every tensor's size fits, and every
  // literal fits its type.
  if (failed(mlir::meg::verifyTensorSizes(module)) ||
      failed(mlir::meg::verifyLiterals(module)))
    return mlir::failure();
  if (failed(checkReservedEntries(module)))
    return mlir::failure();
  // The passes below work on the whole step, which a pipeline has replaced
  // by its ranks' programs.
  bool pipelined = module->hasAttr(mlir::meg::MegDialect::kPipelineAttrName);
  if (pipelined && options.lossChunks > 1)
    return module.emitError()
           << "--loss-chunks does not apply to a pipeline (meg.pipeline) "
              "yet: loss chunks work on the whole training step";
  if (options.recompute != Recompute::None &&
      !module->hasAttr(mlir::meg::MegDialect::kOptimizerAttrName))
    return module.emitError()
           << "--recompute applies to a training model (one with "
              "meg.optimizer, e.g. megc gen --train), which this is not";
  CompileOptions compiled = options;
  if (compiled.memoryBudget &&
      module->hasAttr(mlir::meg::MegDialect::kOptimizerAttrName) &&
      !module.lookupSymbol("train_step")) {
    mlir::FailureOr<std::vector<unsigned>> steps = rematSteps(module, options);
    if (failed(steps))
      return mlir::failure();
    compiled.rematMinSteps = *steps;
  }
  mlir::OpPassManager frontEnd(mlir::ModuleOp::getOperationName());
  buildFrontEndPipeline(frontEnd, module, compiled);
  return runPipeline(module, frontEnd);
}

mlir::FailureOr<std::string> compileModule(mlir::ModuleOp module,
                                           const CompileOptions &options) {
  if (failed(runFrontEnd(module, options)))
    return mlir::failure();

  std::string result;
  raw_string_ostream os(result);
  if (options.emit == Emit::Mlir) {
    module->print(os);
    os << "\n";
    return result;
  }

  mlir::FailureOr<ProgramDesc> program = buildProgram(module, options);
  if (failed(program))
    return mlir::failure();
  if (options.emit == Emit::Kernels) {
    program->kernelModule->print(os);
    os << "\n";
    return result;
  }
  if (options.emit == Emit::MegrtIr) {
    mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> megrt =
        programToMegrt(*program, module.getContext());
    if (failed(megrt))
      return mlir::failure();
    mlir::PassManager pm(module.getContext(),
                         mlir::ModuleOp::getOperationName());
    pm.addNestedPass<rt::EntryOp>(rt::createMegrtPlanMemory());
    if (failed(pm.run(**megrt)))
      return mlir::failure();
    (*megrt)->print(os);
    os << "\n";
    return result;
  }
  if (options.emit == Emit::Gpu || options.emit == Emit::CudaEmulation) {
    mlir::FailureOr<CudaKernelMapping> mapped =
        mapCudaKernels(*program, options, /*prepare=*/true);
    if (failed(mapped))
      return mlir::failure();
    if (options.emit == Emit::CudaEmulation)
      return compileCudaEmulation(*mapped->device);
    mapped->device->print(os);
    os << "\n";
    return result;
  }
  std::optional<CudaModuleDesc> cuda;
  if (options.generatesCuda()) {
    mlir::FailureOr<CudaModuleDesc> compiled =
        compileCudaKernels(*program, options);
    if (failed(compiled))
      return mlir::failure();
    cuda = std::move(*compiled);
  }
  if (options.emit == Emit::Ptx)
    return cuda->ptx;
  std::optional<CpuModuleDesc> cpu;
  if (options.cpu) {
    mlir::FailureOr<CpuModuleDesc> compiled =
        compileCpuKernels(*program, options);
    if (failed(compiled))
      return mlir::failure();
    cpu = std::move(*compiled);
  }
  if (options.emit == Emit::Llvm)
    return cpu->llvmIr;
  if (failed(planMemory(*program)))
    return mlir::failure();
  // A plan no device can hold is almost always a size typed wrong: say so
  // now rather than when a run fails to allocate.
  if (auto [entry, needed] = largestPlan(*program);
      entry && needed > kLargestDeviceBytes)
    mlir::emitWarning(module.getLoc())
        << "entry '" << entry->name << "' needs " << megabytes(needed)
        << " per rank (arena " << megabytes(entry->plan.arenaBytes)
        << ", parameters and state "
        << megabytes(program->stateBytes(entry->pipelineRank))
        << "), more than any device holds (the largest GPUs have "
        << megabytes(kLargestGpuBytes)
        << "); check the model's sizes, or shard it over a mesh";
  if (options.memoryBudget) {
    program->memoryBudget = options.memoryBudget;
    auto [entry, needed] = largestPlan(*program);
    if (entry && needed > options.memoryBudget)
      return module.emitError()
             << "the memory budget of " << megabytes(options.memoryBudget)
             << " per rank is not met: entry '" << entry->name << "'"
             << (entry->pipelineRank >= 0
                     ? " of pipeline rank " +
                           std::to_string(entry->pipelineRank)
                     : std::string())
             << " needs " << megabytes(needed) << " (arena "
             << megabytes(entry->plan.arenaBytes) << ", parameters and state "
             << megabytes(program->stateBytes(entry->pipelineRank)) << ")";
  }
  const CpuModuleDesc *cpuCode = cpu ? &*cpu : nullptr;
  const CudaModuleDesc *cudaCode = cuda ? &*cuda : nullptr;
  if (options.emit == Emit::Megrt) {
    printProgram(*program, cpuCode, cudaCode, os);
    return result;
  }
  return serializeProgram(*program, cpuCode, cudaCode);
}

} // namespace megc
