//===- CompilePipeline.h - a model to an artifact, as a library -*- C++ -*-===//
//
// What `megc model.mlir` does after parsing, shared by the driver and the
// Python bindings: the front-end pipeline, program building, code
// generation, memory planning and serialization, all built from one
// CompileOptions.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_COMPILER_COMPILEPIPELINE_H
#define MEGC_COMPILER_COMPILEPIPELINE_H

#include "megc/Compiler/CompileOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

namespace megc {

/// Registers every dialect that a model or the code generators use.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// Registers megc's passes and pipelines (for the pass manager's
/// reproducers and --mlir-print-ir-*, which name passes by argument) and the
/// pass manager's command-line options, which every pipeline applies.
void registerCompilerPasses();

/// Parses the model file `path` (`-`: stdin) into a module, its buffer
/// kept by `sourceMgr` for located diagnostics (which a
/// SourceMgrDiagnosticHandler on `context` prints). Null on failure: with
/// `error` set when the file cannot be read, else after the parser's
/// diagnostics.
mlir::OwningOpRef<mlir::ModuleOp> parseModuleFile(llvm::StringRef path,
                                                  llvm::SourceMgr &sourceMgr,
                                                  mlir::MLIRContext &context,
                                                  std::string &error);

/// Adds the front end for `module` to `pm`: inlining, RoPE fusion,
/// autodiff, precision and optimizer for a training model, FSDP for a model
/// with a mesh, canonicalization, fusion and CUDA graph outlining, as the
/// options ask.
void buildFrontEndPipeline(mlir::OpPassManager &pm, mlir::ModuleOp module,
                           const CompileOptions &options);

/// Runs `pipeline` on `module` with MLIR's pass manager command-line
/// options applied (--mlir-timing, --mlir-print-ir-*, crash reproducers).
mlir::LogicalResult runPipeline(mlir::ModuleOp module,
                                const mlir::OpPassManager &pipeline);

/// Checks `module`'s reserved entry names and options, then runs the front
/// end on it in place (under --memory-budget, with the budget given to
/// meg-remat lowered until the plan fits): what buildProgram takes.
mlir::LogicalResult runFrontEnd(mlir::ModuleOp module,
                                const CompileOptions &options);

/// Compiles `module` (rewritten in place by the front end) and returns what
/// `options.emit` asks for. Failures are reported through the module's
/// diagnostic engine before failure() is returned.
mlir::FailureOr<std::string> compileModule(mlir::ModuleOp module,
                                           const CompileOptions &options);

} // namespace megc

#endif // MEGC_COMPILER_COMPILEPIPELINE_H
