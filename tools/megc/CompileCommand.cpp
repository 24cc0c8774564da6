//===- CompileCommand.cpp - `megc model.mlir -o model.megc` ------------===//
//
// Parses a model, runs the front-end pipeline (inline, canonicalize, CSE),
// builds and plans the program, compiles the CPU kernels and writes the
// artifact (or the IR, with --emit=mlir).
//
//===----------------------------------------------------------------------===//

#include "CompileCommand.h"

#include "megc/Compiler/Program.h"
#include "megc/Conversion/Passes.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace megc {

namespace {
cl::OptionCategory compileCategory("megc compile options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::cat(compileCategory));
cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(compileCategory));
cl::opt<std::string> emit("emit",
                          cl::desc("What to write: artifact (default), mlir "
                                   "(the IR after the front end), megrt (the "
                                   "program as text) or ptx"),
                          cl::init("artifact"), cl::cat(compileCategory));
cl::list<std::string> targets("target",
                              cl::desc("Targets to generate code for: cpu, "
                                       "cuda (default cpu)"),
                              cl::CommaSeparated, cl::cat(compileCategory));
cl::opt<std::string> cudaArch("cuda-arch",
                              cl::desc("GPU architecture for --target=cuda"),
                              cl::init("sm_90"), cl::cat(compileCategory));

cl::opt<bool> noFuseRope("no-fuse-rope",
                          cl::desc("Keep RoPE unfused (skip meg-fuse-rope)"),
                          cl::init(false), cl::cat(compileCategory));

cl::opt<bool> noFuse("no-fuse",
                      cl::desc("One kernel per op (skip meg-fuse)"),
                      cl::init(false), cl::cat(compileCategory));

cl::opt<std::string> cudaGraphs(
    "cuda-graphs",
    cl::desc("Outline CUDA graph regions: none (default), step or layer"),
    cl::init("none"), cl::cat(compileCategory));
cl::opt<bool> shareIoBuffers(
    "share-io-buffers",
    cl::desc("Chain single-input/single-output layer graphs (with "
             "--cuda-graphs=layer)"),
    cl::init(false), cl::cat(compileCategory));

int fail(const Twine &message) {
  WithColor::error(errs(), "megc") << message << "\n";
  return 1;
}
} // namespace

void registerCompileOptions() {
  // The front end and the code generators build pipelines from text.
  mlir::registerAllPasses();
  mlir::meg::registerMegConversionPasses();
  mlir::meg::registerMegPasses();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
}

bool hasCompileInput() { return !inputFile.empty(); }

int runCompile() {
  bool cuda = false;
  for (const std::string &target : targets) {
    if (target == "cuda")
      cuda = true;
    else if (target != "cpu")
      return fail("unknown --target '" + target + "'; expected cpu or cuda");
  }
  if (emit != "artifact" && emit != "mlir" && emit != "megrt" &&
      emit != "ptx")
    return fail("unknown --emit '" + emit +
                "'; expected artifact, mlir, megrt or ptx");
  if (emit == "ptx")
    cuda = true;
  StringRef arch = cudaArch;
  unsigned archNumber = 0;
  if (!arch.consume_front("sm_") || arch.getAsInteger(10, archNumber) ||
      archNumber < 90)
    return fail("unsupported --cuda-arch '" + cudaArch +
                "'; expected sm_90 or newer (e.g. sm_90, sm_100)");

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::meg::MegDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  auto file = mlir::openInputFile(inputFile, &error);
  if (!file)
    return fail(error);
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // The FailureOr overload: the one taking a pass manager would nest the
  // pipeline one level too deep and run nothing.
  // A model with an optimizer configuration trains: its loss gets a
  // gradient function and a training step.
  bool training =
      (*module)->hasAttr(mlir::meg::MegDialect::kOptimizerAttrName) &&
      !(*module).lookupSymbol("train_step");
  if (cudaGraphs != "none" && cudaGraphs != "step" && cudaGraphs != "layer")
    return fail("unknown --cuda-graphs '" + cudaGraphs +
                "'; expected none, step or layer");
  std::string graphs =
      cudaGraphs == "none"
          ? ""
          : ",meg-outline-cuda-graphs{scope=" + cudaGraphs +
                (shareIoBuffers ? " share-io-buffers" : "") + "}";
  // Fusion runs before autodiff, so that fused ops get fused gradients;
  // CSE first lets q and k share one pair of tables.
  std::string fusion = noFuseRope ? "" : "cse,func.func(meg-fuse-rope),";
  mlir::FailureOr<mlir::OpPassManager> pipeline = mlir::parsePassPipeline(
      "builtin.module(inline," + fusion +
      (training ? "meg-autodiff,meg-precision,meg-optimizer," : "") +
      "canonicalize,cse,symbol-dce" +
      (noFuse ? "" : ",func.func(meg-fuse)") + graphs + ")");
  if (failed(pipeline))
    return fail("internal error: bad front-end pipeline");
  mlir::PassManager frontEnd(&context);
  static_cast<mlir::OpPassManager &>(frontEnd) = std::move(*pipeline);
  if (failed(mlir::applyPassManagerCLOptions(frontEnd)))
    return 1;
  if (failed(frontEnd.run(*module)))
    return 1;

  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output)
    return fail(error);
  if (emit == "mlir") {
    (*module)->print(output->os());
    output->os() << "\n";
    output->keep();
    return 0;
  }

  mlir::FailureOr<ProgramDesc> program = buildProgram(*module);
  if (failed(program))
    return 1;
  for (EntryDesc &entry : program->entries)
    planMemory(entry);
  // CUDA code generation fills the kernels' launch tables, which
  // --emit=megrt shows.
  std::optional<CudaModuleDesc> cudaModule;
  if (cuda) {
    mlir::FailureOr<CudaModuleDesc> compiled =
        compileCudaKernels(*program, cudaArch);
    if (failed(compiled))
      return 1;
    cudaModule = std::move(*compiled);
  }
  if (emit == "megrt") {
    printProgram(*program, output->os());
    output->keep();
    return 0;
  }
  if (emit == "ptx") {
    output->os() << cudaModule->ptx;
    output->keep();
    return 0;
  }
  mlir::FailureOr<std::string> cpu = compileCpuKernels(*program);
  if (failed(cpu))
    return 1;
  output->os() << serializeProgram(*program, *cpu,
                                   cudaModule ? &*cudaModule : nullptr);
  output->keep();
  return 0;
}

} // namespace megc
