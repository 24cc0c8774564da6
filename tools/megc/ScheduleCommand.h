//===- ScheduleCommand.h - `megc schedule` ----------------------*- C++ -*-===//
//
// The `schedule` subcommand: builds, checks and simulates a pipeline
// schedule, and prints each rank's actions.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_SCHEDULECOMMAND_H
#define MEGC_TOOLS_MEGC_SCHEDULECOMMAND_H

#include "llvm/Support/CommandLine.h"

namespace megc {

llvm::cl::SubCommand &scheduleSubCommand();

/// Returns the exit code.
int runSchedule();

} // namespace megc

#endif // MEGC_TOOLS_MEGC_SCHEDULECOMMAND_H
