//===- PlanCommand.h - `megc plan` -------------------------------*- C++
//-*-===//
//
// The `plan` subcommand: compiles a model's layout, simulates its step on a
// cluster and reports the step time, throughput, utilisation, memory and
// communication; calibrates a cluster file from a measured trace.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_PLANCOMMAND_H
#define MEGC_TOOLS_MEGC_PLANCOMMAND_H

#include "llvm/Support/CommandLine.h"

namespace megc {

llvm::cl::SubCommand &planSubCommand();

/// Returns the exit code.
int runPlan();

} // namespace megc

#endif // MEGC_TOOLS_MEGC_PLANCOMMAND_H
