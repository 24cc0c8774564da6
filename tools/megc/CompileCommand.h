//===- CompileCommand.h - `megc model.mlir -o model.megc` -------*- C++ -*-===//
//
// The default action of the megc driver: compile a model to an artifact.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_COMPILECOMMAND_H
#define MEGC_TOOLS_MEGC_COMPILECOMMAND_H

namespace megc {

/// Registers the compile options (and MLIR's own) with the top level.
void registerCompileOptions();

/// True if a model file was named on the command line.
bool hasCompileInput();

/// Compiles after command-line parsing; returns the exit code.
int runCompile();

} // namespace megc

#endif // MEGC_TOOLS_MEGC_COMPILECOMMAND_H
