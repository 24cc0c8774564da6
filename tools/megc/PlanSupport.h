//===- PlanSupport.h - what `megc plan` and its search share ----*- C++ -*-===//
//
// Compiling a model the way `megc` does without generating code, finding
// its training step, the tokens a step trains on, and the error line.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_PLANSUPPORT_H
#define MEGC_TOOLS_MEGC_PLANSUPPORT_H

#include "megc/Compiler/CompilePipeline.h"
#include "megc/Compiler/Program.h"
#include "megc/Plan/Simulate.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/Twine.h"

namespace megc {

/// Prints `megc plan: error: MESSAGE`; returns the exit code 1.
int planFail(const llvm::Twine &message);

/// Compiles `module` with `options` (no code generation) and plans its
/// memory; diagnostics go to the module's context's handler.
mlir::FailureOr<ProgramDesc> compileProgram(mlir::ModuleOp module,
                                            const CompileOptions &options);

/// The entry named train_step, or null.
const EntryDesc *trainStep(const ProgramDesc &program);

/// The tokens one step trains on, over every rank: the entry's integer
/// input named input_ids (else its first integer input), global along
/// the batch when the input is split.
double globalTokens(const ProgramDesc &program, const EntryDesc &entry);

/// Writes `sim` to `path` as a Chrome trace: the (slowest) rank's compute
/// and communication streams, and for a pipeline every rank's passes as
/// the schedule played out.
llvm::Error writePlanTrace(const plan::Simulation &sim, llvm::StringRef path);

} // namespace megc

#endif // MEGC_TOOLS_MEGC_PLANSUPPORT_H
