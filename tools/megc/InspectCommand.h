//===- InspectCommand.h - `megc inspect` ------------------------*- C++ -*-===//
//
// The `inspect` subcommand: describes an artifact.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_INSPECTCOMMAND_H
#define MEGC_TOOLS_MEGC_INSPECTCOMMAND_H

#include "llvm/Support/CommandLine.h"

namespace megc {

llvm::cl::SubCommand &inspectSubCommand();

/// Prints the artifact's entries, parameters, kernels, command counts and
/// memory plans; returns the exit code.
int runInspect();

} // namespace megc

#endif // MEGC_TOOLS_MEGC_INSPECTCOMMAND_H
