//===- ScheduleCommand.h - `megc schedule` ----------------------*- C++ -*-===//
//
// The `schedule` subcommand: builds, checks and simulates a pipeline
// schedule, and prints each rank's actions.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_SCHEDULECOMMAND_H
#define MEGC_TOOLS_MEGC_SCHEDULECOMMAND_H

#include "megc/Pipeline/Schedule.h"

#include "llvm/Support/CommandLine.h"

namespace megc {

llvm::cl::SubCommand &scheduleSubCommand();

/// Returns the exit code.
int runSchedule();

/// Builds, checks and simulates the schedule on `costs`, prints each rank's
/// actions, the makespan, the bubble and the micro-batches each rank keeps
/// in flight, and with a `traceFile` writes the timeline as a Chrome trace.
/// Errors are reported as `tool`'s; returns the exit code.
int drawSchedule(pipeline::ScheduleKind kind, int32_t ranks, int32_t chunks,
                 int32_t microBatches, const pipeline::PassCosts &costs,
                 llvm::StringRef traceFile, llvm::StringRef tool,
                 llvm::raw_ostream &os);

} // namespace megc

#endif // MEGC_TOOLS_MEGC_SCHEDULECOMMAND_H
