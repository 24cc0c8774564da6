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
// One option per line of CompileFlags.def, named `<field>Flag`.
#define MEGC_COMPILE_FLAG(field, kind, flag, python, value, help)              \
  MEGC_COMPILE_FLAG_OPTION_##kind(field, flag, value, help)
#define MEGC_COMPILE_FLAG_OPTION_List(field, flag, value, help)                \
  cl::list<std::string> field##Flag(flag, cl::desc(help), cl::CommaSeparated,  \
                                    cl::cat(compileCategory));
#define MEGC_COMPILE_FLAG_OPTION_String(field, flag, value, help)              \
  cl::opt<std::string> field##Flag(flag, cl::desc(help), cl::init(value),      \
                                   cl::cat(compileCategory));
#define MEGC_COMPILE_FLAG_OPTION_Bool(field, flag, value, help)                \
  cl::opt<bool> field##Flag(flag, cl::desc(help), cl::init(value),             \
                            cl::cat(compileCategory));
#define MEGC_COMPILE_FLAG_OPTION_Int(field, flag, value, help)                 \
  cl::opt<int64_t> field##Flag(flag, cl::desc(help), cl::init(value),          \
                               cl::cat(compileCategory));
#include "megc/Compiler/CompileFlags.def"

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

Expected<CompileOptions> compileOptionsFromFlags() {
  CompileFlags flags;
#define MEGC_COMPILE_FLAG(field, kind, flag, python, value, help)              \
  flags.field = field##Flag;
#include "megc/Compiler/CompileFlags.def"
  return parseCompileFlags(flags);
}

int runCompile() {
  Expected<CompileOptions> options = compileOptionsFromFlags();
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
