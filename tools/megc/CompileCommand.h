//===- CompileCommand.h - `megc model.mlir -o model.megc` -------*- C++ -*-===//
//
// The default action of the megc driver: compile a model to an artifact.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_COMPILECOMMAND_H
#define MEGC_TOOLS_MEGC_COMPILECOMMAND_H

#include "megc/Compiler/CompileOptions.h"

#include "llvm/Support/Error.h"

namespace megc {

/// The compile options the command line gives (`megc plan` compiles with
/// them too).
llvm::Expected<CompileOptions> compileOptionsFromFlags();

/// Registers the compile options (and MLIR's own) with the top level.
void registerCompileOptions();

/// True if a model file was named on the command line.
bool hasCompileInput();

/// Compiles after command-line parsing; returns the exit code.
int runCompile();

} // namespace megc

#endif // MEGC_TOOLS_MEGC_COMPILECOMMAND_H
