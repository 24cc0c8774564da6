//===- ScheduleCommand.cpp - `megc schedule` ----------------------------===//
//
// Builds the pipeline schedule the options name, checks it (every pass
// once, every transfer matched, no rank waiting forever), simulates it on
// the given pass costs and prints each rank's actions, the makespan, the
// bubble and the activations each rank holds at most; --trace writes the
// simulated timeline as a Chrome trace.
//
//===----------------------------------------------------------------------===//

#include "ScheduleCommand.h"

#include "megc/Pipeline/Schedule.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace megc {

cl::SubCommand &scheduleSubCommand() {
  static cl::SubCommand command(
      "schedule", "Build, check and simulate a pipeline schedule");
  return command;
}

namespace {

cl::OptionCategory scheduleCategory("megc schedule options");

cl::opt<int> ranks("pp", cl::desc("Pipeline ranks"), cl::init(2),
                   cl::sub(scheduleSubCommand()), cl::cat(scheduleCategory));
cl::opt<int> microBatches("micro-batches", cl::desc("Micro-batches a step"),
                          cl::init(4), cl::sub(scheduleSubCommand()),
                          cl::cat(scheduleCategory));
cl::opt<std::string> kindName("pp-schedule",
                              cl::desc("1f1b, interleaved or zb-h1"),
                              cl::init("1f1b"), cl::sub(scheduleSubCommand()),
                              cl::cat(scheduleCategory));
cl::opt<int> chunks("pp-virtual",
                    cl::desc("Stages per rank (interleaved schedule)"),
                    cl::init(1), cl::sub(scheduleSubCommand()),
                    cl::cat(scheduleCategory));
cl::opt<std::string>
    costsText("costs",
              cl::desc("Relative time of one stage's F, B, W and of a "
                       "transfer (default 1,1,1,0)"),
              cl::init("1,1,1,0"), cl::sub(scheduleSubCommand()),
              cl::cat(scheduleCategory));
cl::opt<std::string> traceFile("trace",
                               cl::desc("Write the simulated timeline as a "
                                        "Chrome trace"),
                               cl::init(""), cl::sub(scheduleSubCommand()),
                               cl::cat(scheduleCategory));

int fail(const Twine &message) {
  WithColor::error(errs(), "megc schedule") << message << "\n";
  return 1;
}

} // namespace

int runSchedule() {
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(kindName);
  if (!kind)
    return fail("--pp-schedule '" + kindName +
                "' is none of 1f1b, interleaved, zb-h1");
  SmallVector<StringRef, 4> parts;
  StringRef(costsText).split(parts, ',');
  double values[4];
  if (parts.size() != 4)
    return fail("--costs '" + costsText + "' needs four numbers: F,B,W,T");
  for (size_t i = 0; i < 4; ++i)
    if (parts[i].trim().getAsDouble(values[i]) || values[i] < 0)
      return fail("--costs '" + costsText + "': '" + parts[i] +
                  "' is not a non-negative number");
  pipeline::PassCosts costs{values[0], values[1], values[2], values[3]};
  return drawSchedule(*kind, ranks, chunks, microBatches, costs, traceFile,
                      "megc schedule", outs());
}

int drawSchedule(pipeline::ScheduleKind kind, int32_t ranks, int32_t chunks,
                 int32_t microBatches, const pipeline::PassCosts &costs,
                 StringRef traceFile, StringRef tool, raw_ostream &os) {
  auto fail = [&](const Twine &message) {
    WithColor::error(errs(), tool) << message << "\n";
    return 1;
  };
  Expected<pipeline::Schedule> schedule =
      pipeline::buildSchedule(kind, ranks, chunks, microBatches, costs);
  if (!schedule)
    return fail(toString(schedule.takeError()));
  Expected<pipeline::Timeline> timeline =
      pipeline::simulateSchedule(*schedule, costs);
  if (!timeline)
    return fail(toString(timeline.takeError()));
  pipeline::printSchedule(*schedule, os);
  double work = static_cast<double>(microBatches) * chunks *
                (costs.forward + costs.backwardInput + costs.backwardWeight);
  os << format("makespan %.4g (the work of one rank: %.4g), bubble %.1f%%\n",
               timeline->makespan, work, timeline->bubbleFraction() * 100);
  os << "micro-batches in flight at most:";
  for (int32_t r = 0; r < schedule->ranks; ++r)
    os << " rank " << r << " " << timeline->peakInFlight[r]
       << (r + 1 < schedule->ranks ? "," : "\n");
  if (!traceFile.empty()) {
    std::error_code error;
    raw_fd_ostream out(traceFile, error, sys::fs::OF_Text);
    if (error)
      return fail("cannot write '" + traceFile + "': " + error.message());
    pipeline::writeScheduleTrace(*schedule, *timeline, out);
  }
  return 0;
}

} // namespace megc
