//===- CompileCommand.cpp - `megc model.mlir -o model.megc` ------------===//
//
// The compile flags of the driver: parses the model file and hands it to
// the compile pipeline (megc/Compiler/CompilePipeline.h), then writes what
// it returns.
//
//===----------------------------------------------------------------------===//

#include "CompileCommand.h"

#include "megc/Compiler/CompilePipeline.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
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
                                   "program as text), kernels (the kernel "
                                   "functions the back end compiles), llvm "
                                   "(the CPU code's optimised LLVM IR), "
                                   "ptx, gpu (the GPU kernels as the NVVM "
                                   "conversion receives them) or "
                                   "cuda-emulation (those kernels as a "
                                   "shared object for the GPU emulator)"),
                          cl::init("artifact"), cl::cat(compileCategory));
cl::list<std::string> targets("target",
                              cl::desc("Targets to generate code for: cpu, "
                                       "cuda (default cpu)"),
                              cl::CommaSeparated, cl::cat(compileCategory));
cl::opt<std::string>
    cudaArch("cuda-arch",
             cl::desc("GPU architecture for --target=cuda: sm_90, sm_90a, "
                      "sm_100, sm_100a, ..."),
             cl::init("sm_90"), cl::cat(compileCategory));

cl::opt<std::string>
    cpu("cpu",
        cl::desc("CPU code: x86-64 (default, any x86-64 host) or native (also "
                 "this host's instruction-set extensions)"),
        cl::init("x86-64"), cl::cat(compileCategory));

cl::opt<bool> noFuseRope("no-fuse-rope",
                         cl::desc("Keep RoPE unfused (skip meg-fuse-rope)"),
                         cl::init(false), cl::cat(compileCategory));

cl::opt<bool> noFuse("no-fuse", cl::desc("One kernel per op (skip meg-fuse)"),
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
cl::opt<bool> captureCollectives(
    "capture-collectives",
    cl::desc("Capture collectives (NCCL) inside the CUDA graph regions "
             "instead of splitting the regions at them (with --cuda-graphs)"),
    cl::init(false), cl::cat(compileCategory));

cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Recompute activations in the backward: none (default), "
             "selective (each layer's normalizations, RoPE, attention and "
             "activations; its matrix products are kept) or full (whole "
             "layers from their inputs)"),
    cl::init("none"), cl::cat(compileCategory));
cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Bytes per rank every entry's plan (arena plus parameters and "
             "state) must fit in, e.g. 40GiB: megc recomputes layers, as "
             "few as it can, until it does"),
    cl::init(""), cl::cat(compileCategory));

cl::opt<int64_t> lossChunks(
    "loss-chunks",
    cl::desc("Run the loss's final norm, LM head and cross-entropy over this "
             "many chunks of tokens (recomputed in the backward), so that the "
             "full logits never exist at once; it must divide the tokens "
             "(default 1)"),
    cl::init(1), cl::cat(compileCategory));

int fail(const Twine &message) {
  WithColor::error(errs(), "megc") << message << "\n";
  return 1;
}
} // namespace

void registerCompileOptions() {
  // Passes by name: reproducers and --mlir-print-ir-* name them.
  registerCompilerPasses();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  // --help lists megc's flags and MLIR's (--mlir-*), not the hundreds of
  // LLVM back-end options the linked libraries register.
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    bool ours = llvm::is_contained(option->Categories, &compileCategory);
    if (!ours && !entry.first.starts_with("mlir-") && entry.first != "help" &&
        entry.first != "version")
      option->setHiddenFlag(cl::ReallyHidden);
  }
}

bool hasCompileInput() { return !inputFile.empty(); }

int runCompile() {
  CompileFlags flags;
  flags.targets = targets;
  flags.cudaArch = cudaArch;
  flags.cpu = cpu;
  flags.emit = emit;
  flags.noFuse = noFuse;
  flags.noFuseRope = noFuseRope;
  flags.cudaGraphs = cudaGraphs;
  flags.shareIoBuffers = shareIoBuffers;
  flags.captureCollectives = captureCollectives;
  flags.recompute = recompute;
  flags.lossChunks = lossChunks;
  flags.memoryBudget = memoryBudget;
  Expected<CompileOptions> options = parseCompileFlags(flags);
  if (!options)
    return fail(toString(options.takeError()));

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      parseModuleFile(inputFile, sourceMgr, context, error);
  if (!module)
    return error.empty() ? 1 : fail(error);

  mlir::FailureOr<std::string> result = compileModule(*module, *options);
  if (failed(result))
    return 1;
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output)
    return fail(error);
  output->os() << *result;
  output->keep();
  return 0;
}

} // namespace megc
