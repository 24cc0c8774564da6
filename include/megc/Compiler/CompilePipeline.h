//===- CompilePipeline.h - a model to an artifact, as a library -*- C++ -*-===//
//
// What `megc model.mlir` does after parsing, shared by the driver and the
// Python bindings: the front-end pipeline, program building, memory
// planning, code generation and serialization.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_COMPILER_COMPILEPIPELINE_H
#define MEGC_COMPILER_COMPILEPIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace megc {

/// The compile flags of `megc`, one field per flag.
struct CompileOptions {
  /// `cpu` and/or `cuda`; empty means cpu.
  std::vector<std::string> targets;
  std::string cudaArch = "sm_90";
  /// The CPU code's instruction set: `x86-64` (runs on any x86-64 host) or
  /// `native` (also the extensions of this host that megrt can check,
  /// megrt/CpuFeatures.h; the runtime refuses it on a CPU without them).
  std::string cpu = "x86-64";
  /// `artifact` (the bytes of a .megc file), `mlir` (the IR after the front
  /// end), `megrt` (the program as text) or `ptx`.
  std::string emit = "artifact";
  bool noFuse = false;
  bool noFuseRope = false;
  /// `none`, `step` or `layer`.
  std::string cudaGraphs = "none";
  bool shareIoBuffers = false;
};

/// Checks every option before any work; the error names the flag as the
/// driver spells it (e.g. "unknown --target 'tpu'; expected cpu or cuda").
llvm::Error verifyCompileOptions(const CompileOptions &options);

/// Registers every dialect that a model or the code generators use.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// Registers the passes the pipelines name (they are parsed from text, so
/// every pass must be in the global registry first) and the pass manager's
/// command-line options, which every pipeline applies.
void registerCompilerPasses();

/// Compiles `module` (rewritten in place by the front end) and returns what
/// `options.emit` asks for. `options` must have been verified. Failures are
/// reported through the module's diagnostic engine before failure() is
/// returned. `configure` may adjust the front-end pass manager (the driver
/// applies MLIR's command-line options there).
mlir::FailureOr<std::string> compileModule(
    mlir::ModuleOp module, const CompileOptions &options,
    llvm::function_ref<mlir::LogicalResult(mlir::PassManager &)> configure =
        nullptr);

} // namespace megc

#endif // MEGC_COMPILER_COMPILEPIPELINE_H
