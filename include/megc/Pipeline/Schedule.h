//===- Schedule.h - pipeline schedules as data -------------------*- C++
//-*-===//
//
// A pipeline schedule is each rank's static list of actions: the forward
// (F) and backward passes of each micro-batch through each of its stages,
// the transfers between stages, and the optimizer step. The backward is
// one pass (BW: the gradients of inputs and weights together), or for the
// zero-bubble schedules two: B (the gradients of the stage's inputs, on
// the critical path between stages) and W (the gradients of its weights,
// free to run later). Stage s of ranks * chunks stages runs on rank
// s % ranks (chunk s / ranks of that rank): one chunk per rank is the
// plain pipeline, several the interleaved one.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_PIPELINE_SCHEDULE_H
#define MEGC_PIPELINE_SCHEDULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megc::pipeline {

enum class ScheduleKind { OneFOneB, Interleaved, ZeroBubbleH1 };

/// "1f1b", "interleaved", "zb-h1".
llvm::StringRef scheduleName(ScheduleKind kind);
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);

enum class Pass {
  Forward,        // F
  Backward,       // BW: input and weight gradients together
  BackwardInput,  // B
  BackwardWeight, // W
  SendActivation, // F's output to the next stage's rank
  RecvActivation, // the previous stage's output, before F
  SendGradient,   // B's (or BW's) input gradient to the previous stage
  RecvGradient,   // the next stage's input gradient, before B (or BW)
  OptimizerStep,  // once per rank, after its last backward
};

/// "F", "BW", "B", "W", "send-act", "recv-act", "send-grad", "recv-grad",
/// "optimizer".
llvm::StringRef passName(Pass pass);

struct Action {
  Pass pass;
  /// The micro-batch and the (virtual) stage, -1 for the optimizer step.
  int32_t microBatch = -1;
  int32_t stage = -1;
  bool operator==(const Action &other) const {
    return pass == other.pass && microBatch == other.microBatch &&
           stage == other.stage;
  }
};

/// The relative time of each pass of one stage (and of a transfer), which
/// the zero-bubble schedules place W passes by and the simulation times.
struct PassCosts {
  double forward = 1, backwardInput = 1, backwardWeight = 1, transfer = 0;

  /// The time of `pass` on its rank (transfers take none there: theirs is
  /// the receiver's wait).
  double of(Pass pass) const;
};

struct Schedule {
  ScheduleKind kind;
  int32_t ranks = 1, chunks = 1, microBatches = 1;
  /// Per rank, its actions in the order it runs them.
  std::vector<std::vector<Action>> actions;

  int32_t numStages() const { return ranks * chunks; }
  int32_t rankOf(int32_t stage) const { return stage % ranks; }
};

/// Builds the schedule: 1f1b (chunks 1), interleaved (Megatron's order;
/// chunks >= 2, micro-batches a multiple of the ranks), zb-h1 (1F1B's
/// order with each W deferred into the time its rank would wait, by
/// `costs`). Transfers are placed next to the passes that produce and use
/// them, and every rank ends with its optimizer step. Errors name the
/// setting that does not fit.
llvm::Expected<Schedule> buildSchedule(ScheduleKind kind, int32_t ranks,
                                       int32_t chunks, int32_t microBatches,
                                       const PassCosts &costs = {});

/// When each action runs under `costs`: each rank runs its list in order,
/// an action waiting for what it needs (its stage's earlier passes of the
/// micro-batch, a received transfer sent earlier plus the transfer time).
struct Timeline {
  /// Per rank, per action (in the schedule's order): start and end.
  std::vector<std::vector<std::pair<double, double>>> spans;
  double makespan = 0;
  /// Per rank: the time its passes keep it busy, and the most micro-batches
  /// whose forward has run and whose last backward pass has not.
  std::vector<double> busy;
  std::vector<int32_t> peakInFlight;
  /// The largest share of the makespan a rank spends waiting.
  double bubbleFraction() const;
};

/// Checks the schedule and simulates it: every stage's F and backward
/// passes for every micro-batch exactly once, on the stage's rank; every
/// transfer between ranks sent once and received once by the right ranks;
/// no pass before what it needs in its rank's order; and no rank waiting
/// forever (a cycle of receives). Errors name the first problem.
/// With `rankCosts` (one per rank), a rank's passes take its own costs.
llvm::Expected<Timeline>
simulateSchedule(const Schedule &schedule, const PassCosts &costs = {},
                 llvm::ArrayRef<PassCosts> rankCosts = {});

/// Each rank's actions, one line per rank ("rank 0: F0.0 F1.0 ...": pass,
/// micro-batch, stage).
void printSchedule(const Schedule &schedule, llvm::raw_ostream &os);

/// The simulated timeline as a Chrome trace (one row per rank).
void writeScheduleTrace(const Schedule &schedule, const Timeline &timeline,
                        llvm::raw_ostream &os);

/// Its events: one row (tid) per rank in process `pid`, the timeline's
/// times multiplied by `microsecondsPerUnit` (1000 for costs in
/// milliseconds, 1e6 for seconds).
llvm::json::Array scheduleTraceEvents(const Schedule &schedule,
                                      const Timeline &timeline, int64_t pid,
                                      double microsecondsPerUnit);

} // namespace megc::pipeline

#endif // MEGC_PIPELINE_SCHEDULE_H
