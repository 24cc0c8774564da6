//===- CompilePipeline.cpp - a model to an artifact, as a library -------===//
//
// Runs the front-end pipeline (inline, RoPE fusion, autodiff and optimizer
// for a training model, canonicalize, CSE, fusion, CUDA graph outlining),
// builds and plans the program, compiles the kernels and serializes the
// artifact, or stops at what --emit asks for.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/CompilePipeline.h"

#include "megc/Compiler/Program.h"
#include "megc/Conversion/Passes.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace megc {

namespace {
Error optionError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

bool wantsCuda(const CompileOptions &options) {
  return options.emit == "ptx" || llvm::is_contained(options.targets, "cuda");
}

/// The front end as pass pipeline text.
std::string frontEndPipeline(mlir::ModuleOp module,
                             const CompileOptions &options) {
  // A model with an optimizer configuration trains: its loss gets a
  // gradient function and a training step.
  bool training = module->hasAttr(mlir::meg::MegDialect::kOptimizerAttrName) &&
                  !module.lookupSymbol("train_step");
  std::string graphs =
      options.cudaGraphs == "none"
          ? ""
          : ",meg-outline-cuda-graphs{scope=" + options.cudaGraphs +
                (options.shareIoBuffers ? " share-io-buffers" : "") + "}";
  // Fusion runs before autodiff, so that fused ops get fused gradients;
  // CSE first lets q and k share one pair of tables.
  std::string fusion =
      options.noFuseRope ? "" : "cse,func.func(meg-fuse-rope),";
  bool fsdp = module->hasAttr(mlir::meg::MegDialect::kFsdpAttrName);
  return "builtin.module(inline," + fusion +
         (training ? "meg-autodiff,meg-precision,meg-optimizer," : "") +
         (fsdp ? "meg-fsdp," : "") +
         "canonicalize,cse,symbol-dce" +
         (options.noFuse ? "" : ",func.func(meg-fuse)") + graphs + ")";
}
} // namespace

Error verifyCompileOptions(const CompileOptions &options) {
  for (const std::string &target : options.targets)
    if (target != "cpu" && target != "cuda")
      return optionError("unknown --target '" + target +
                         "'; expected cpu or cuda");
  const std::string &emit = options.emit;
  if (emit != "artifact" && emit != "mlir" && emit != "megrt" && emit != "ptx")
    return optionError("unknown --emit '" + emit +
                       "'; expected artifact, mlir, megrt or ptx");
  StringRef arch = options.cudaArch;
  unsigned archNumber = 0;
  if (!arch.consume_front("sm_") || arch.getAsInteger(10, archNumber) ||
      archNumber < 90)
    return optionError("unsupported --cuda-arch '" + options.cudaArch +
                       "'; expected sm_90 or newer (e.g. sm_90, sm_100)");
  if (options.cpu != "x86-64" && options.cpu != "native")
    return optionError("unknown --cpu '" + options.cpu +
                       "'; expected x86-64 (any x86-64 host) or native (also "
                       "this host's instruction-set extensions)");
  const std::string &graphs = options.cudaGraphs;
  if (graphs != "none" && graphs != "step" && graphs != "layer")
    return optionError("unknown --cuda-graphs '" + graphs +
                       "'; expected none, step or layer");
  return Error::success();
}

void registerCompilerDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::meg::MegDialect>();
}

void registerCompilerPasses() {
  mlir::registerAllPasses();
  mlir::meg::registerMegConversionPasses();
  mlir::meg::registerMegPasses();
  // Every pipeline applies them (timing, IR printing, reproducers), and
  // applying them fails unless they exist.
  mlir::registerPassManagerCLOptions();
}

mlir::FailureOr<std::string> compileModule(
    mlir::ModuleOp module, const CompileOptions &options,
    function_ref<mlir::LogicalResult(mlir::PassManager &)> configure) {
  // The FailureOr overload: the one taking a pass manager would nest the
  // pipeline one level too deep and run nothing.
  std::string text = frontEndPipeline(module, options);
  mlir::FailureOr<mlir::OpPassManager> pipeline = mlir::parsePassPipeline(text);
  if (failed(pipeline))
    return mlir::emitError(module.getLoc())
           << "internal error: bad front-end pipeline " << text;
  mlir::PassManager frontEnd(module.getContext());
  static_cast<mlir::OpPassManager &>(frontEnd) = std::move(*pipeline);
  if (configure && failed(configure(frontEnd)))
    return mlir::failure();
  if (failed(frontEnd.run(module)))
    return mlir::failure();

  std::string result;
  raw_string_ostream os(result);
  if (options.emit == "mlir") {
    module->print(os);
    os << "\n";
    return result;
  }

  mlir::FailureOr<ProgramDesc> program = buildProgram(module);
  if (failed(program))
    return mlir::failure();
  for (EntryDesc &entry : program->entries)
    planMemory(entry);
  // CUDA code generation fills the kernels' launch tables, which
  // --emit=megrt shows.
  std::optional<CudaModuleDesc> cudaModule;
  if (wantsCuda(options)) {
    mlir::FailureOr<CudaModuleDesc> compiled =
        compileCudaKernels(*program, options.cudaArch);
    if (failed(compiled))
      return mlir::failure();
    cudaModule = std::move(*compiled);
  }
  if (options.emit == "megrt") {
    printProgram(*program, os);
    return result;
  }
  if (options.emit == "ptx")
    return cudaModule->ptx;
  mlir::FailureOr<CpuModuleDesc> cpu =
      compileCpuKernels(*program, cpuFeatures(options.cpu));
  if (failed(cpu))
    return mlir::failure();
  return serializeProgram(*program, *cpu, cudaModule ? &*cudaModule : nullptr);
}

} // namespace megc
