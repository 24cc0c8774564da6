//===- ScheduleSimulation.cpp - checking and timing pipeline schedules ----===//
//
// Runs every rank's list in time order on the cost model, as the runtime
// would: a pass waits for what it needs, a receive for its send plus the
// transfer time. An action whose need on its own rank is not met by an
// earlier action of that rank would wait forever, so the schedule is
// refused; so is one in which every rank waits on a receive (a cycle).
//
//===----------------------------------------------------------------------===//

#include "megc/Pipeline/Schedule.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace megc::pipeline {
namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string describe(const Action &action) {
  if (action.pass == Pass::OptimizerStep)
    return "optimizer";
  return (passName(action.pass) + llvm::Twine(action.microBatch) + "." +
          llvm::Twine(action.stage))
      .str();
}

using Key = std::tuple<Pass, int32_t, int32_t>;

} // namespace

double Timeline::bubbleFraction() const {
  double worst = 0;
  for (double each : busy)
    worst = std::max(worst, makespan > 0 ? (makespan - each) / makespan : 0);
  return worst;
}

llvm::Expected<Timeline> simulateSchedule(const Schedule &schedule,
                                          const PassCosts &costs,
                                          llvm::ArrayRef<PassCosts> rankCosts) {
  int32_t ranks = schedule.ranks, stages = schedule.numStages();
  if (!rankCosts.empty() && static_cast<int32_t>(rankCosts.size()) != ranks)
    return error("pipeline schedule: " + llvm::Twine(rankCosts.size()) +
                 " ranks' pass costs for " + llvm::Twine(ranks) + " ranks");
  if (static_cast<int32_t>(schedule.actions.size()) != ranks)
    return error("pipeline schedule: " + llvm::Twine(schedule.actions.size()) +
                 " action lists for " + llvm::Twine(ranks) + " ranks");
  // Every action once, on the rank of its stage.
  std::map<Key, int32_t> seen;
  for (int32_t r = 0; r < ranks; ++r) {
    int optimizer = 0;
    for (const Action &action : schedule.actions[r]) {
      if (action.pass == Pass::OptimizerStep) {
        ++optimizer;
        continue;
      }
      if (action.microBatch < 0 || action.microBatch >= schedule.microBatches ||
          action.stage < 0 || action.stage >= stages)
        return error("pipeline schedule: rank " + llvm::Twine(r) + ": " +
                     describe(action) + " names no micro-batch and stage of " +
                     llvm::Twine(schedule.microBatches) + " x " +
                     llvm::Twine(stages));
      if (schedule.rankOf(action.stage) != r)
        return error("pipeline schedule: rank " + llvm::Twine(r) + " runs " +
                     describe(action) + ", a pass of stage " +
                     llvm::Twine(action.stage) + ", which is rank " +
                     llvm::Twine(schedule.rankOf(action.stage)) + "'s");
      if (!seen.emplace(Key{action.pass, action.microBatch, action.stage}, r)
               .second)
        return error("pipeline schedule: rank " + llvm::Twine(r) + " runs " +
                     describe(action) + " twice");
    }
    if (optimizer != 1)
      return error("pipeline schedule: rank " + llvm::Twine(r) + " runs " +
                   llvm::Twine(optimizer) +
                   " optimizer steps, expected one, after its passes");
    if (schedule.actions[r].empty() ||
        schedule.actions[r].back().pass != Pass::OptimizerStep)
      return error("pipeline schedule: rank " + llvm::Twine(r) +
                   " does not end with its optimizer step");
  }
  auto has = [&](Pass pass, int32_t m, int32_t s) {
    return seen.count(Key{pass, m, s}) != 0;
  };
  for (int32_t m = 0; m < schedule.microBatches; ++m)
    for (int32_t s = 0; s < stages; ++s) {
      std::string what =
          ("micro-batch " + llvm::Twine(m) + " of stage " + llvm::Twine(s))
              .str();
      if (!has(Pass::Forward, m, s))
        return error("pipeline schedule: no forward pass of " + what);
      bool whole = has(Pass::Backward, m, s);
      bool split =
          has(Pass::BackwardInput, m, s) || has(Pass::BackwardWeight, m, s);
      if (whole == split || (split && !(has(Pass::BackwardInput, m, s) &&
                                        has(Pass::BackwardWeight, m, s))))
        return error("pipeline schedule: " + what +
                     " needs one backward pass (BW) or both of its halves "
                     "(B and W)");
      bool remoteNext =
          s + 1 < stages && schedule.rankOf(s + 1) != schedule.rankOf(s);
      bool remotePrevious =
          s > 0 && schedule.rankOf(s - 1) != schedule.rankOf(s);
      if (remoteNext != has(Pass::SendActivation, m, s) ||
          remoteNext != has(Pass::RecvGradient, m, s) ||
          remotePrevious != has(Pass::RecvActivation, m, s) ||
          remotePrevious != has(Pass::SendGradient, m, s))
        return error("pipeline schedule: the transfers of " + what +
                     " do not match its neighbours' ranks (each transfer "
                     "between ranks is sent once and received once)");
    }

  // Run the lists in time order.
  Timeline timeline;
  timeline.spans.assign(ranks, {});
  timeline.busy.assign(ranks, 0);
  timeline.peakInFlight.assign(ranks, 0);
  std::vector<size_t> next(ranks, 0);
  std::vector<double> now(ranks, 0);
  std::vector<int32_t> inFlight(ranks, 0);
  std::map<Key, double> done;
  auto finished = [&](Pass pass, int32_t m,
                      int32_t s) -> std::optional<double> {
    auto it = done.find(Key{pass, m, s});
    if (it == done.end())
      return std::nullopt;
    return it->second;
  };
  // What an action needs: (the action, on which rank); the time it can
  // start is the latest end among them (plus the transfer for a receive).
  auto needs = [&](const Action &action) {
    std::vector<std::pair<Key, bool>> list; // (need, is a remote send)
    int32_t m = action.microBatch, s = action.stage;
    auto local = [&](Pass pass, int32_t stage) {
      list.push_back({Key{pass, m, stage}, false});
    };
    bool localPrevious = s > 0 && schedule.rankOf(s - 1) == schedule.rankOf(s);
    bool localNext =
        s + 1 < stages && schedule.rankOf(s + 1) == schedule.rankOf(s);
    Pass backwardNext =
        has(Pass::Backward, m, s + 1) ? Pass::Backward : Pass::BackwardInput;
    switch (action.pass) {
    case Pass::Forward:
      if (localPrevious)
        local(Pass::Forward, s - 1);
      else if (s > 0)
        local(Pass::RecvActivation, s);
      break;
    case Pass::Backward:
    case Pass::BackwardInput:
      local(Pass::Forward, s);
      if (localNext)
        local(backwardNext, s + 1);
      else if (s + 1 < stages)
        local(Pass::RecvGradient, s);
      break;
    case Pass::BackwardWeight:
      local(Pass::BackwardInput, s);
      break;
    case Pass::SendActivation:
      local(Pass::Forward, s);
      break;
    case Pass::SendGradient:
      local(has(Pass::Backward, m, s) ? Pass::Backward : Pass::BackwardInput,
            s);
      break;
    case Pass::RecvActivation:
      list.push_back({Key{Pass::SendActivation, m, s - 1}, true});
      break;
    case Pass::RecvGradient:
      list.push_back({Key{Pass::SendGradient, m, s + 1}, true});
      break;
    case Pass::OptimizerStep:
      break;
    }
    return list;
  };
  int32_t remaining = 0;
  for (const auto &list : schedule.actions)
    remaining += static_cast<int32_t>(list.size());
  while (remaining > 0) {
    int32_t best = -1;
    double bestStart = std::numeric_limits<double>::infinity();
    for (int32_t r = 0; r < ranks; ++r) {
      if (next[r] == schedule.actions[r].size())
        continue;
      const Action &action = schedule.actions[r][next[r]];
      double start = now[r];
      bool blocked = false;
      for (const auto &[need, remote] : needs(action)) {
        std::optional<double> end =
            finished(std::get<0>(need), std::get<1>(need), std::get<2>(need));
        if (!end && !remote) {
          Action wanted{std::get<0>(need), std::get<1>(need),
                        std::get<2>(need)};
          return error("pipeline schedule: rank " + llvm::Twine(r) + " runs " +
                       describe(action) + " before " + describe(wanted) +
                       ", which it needs");
        }
        if (!end) {
          blocked = true;
          break;
        }
        start = std::max(start, *end + (remote ? costs.transfer : 0));
      }
      if (action.pass == Pass::OptimizerStep) {
        // After every backward pass of the rank's stages.
        for (const Action &other : schedule.actions[r])
          if ((other.pass == Pass::Backward ||
               other.pass == Pass::BackwardWeight) &&
              !finished(other.pass, other.microBatch, other.stage))
            return error("pipeline schedule: rank " + llvm::Twine(r) +
                         " runs its optimizer step before " + describe(other));
      }
      if (!blocked && start < bestStart)
        best = r, bestStart = start;
    }
    if (best < 0) {
      std::string waiting;
      for (int32_t r = 0; r < ranks; ++r)
        if (next[r] < schedule.actions[r].size())
          waiting += (waiting.empty() ? "" : ", ") +
                     ("rank " + llvm::Twine(r) + " at " +
                      describe(schedule.actions[r][next[r]]))
                         .str();
      return error("pipeline schedule: every rank waits on a receive that "
                   "no rank will send (" +
                   waiting + ")");
    }
    const Action &action = schedule.actions[best][next[best]++];
    double cost = (rankCosts.empty() ? costs : rankCosts[best]).of(action.pass);
    double end = bestStart + cost;
    timeline.spans[best].push_back({bestStart, end});
    timeline.busy[best] += cost;
    now[best] = end;
    done[Key{action.pass, action.microBatch, action.stage}] = end;
    if (action.pass == Pass::Forward)
      timeline.peakInFlight[best] =
          std::max(timeline.peakInFlight[best], ++inFlight[best]);
    if (action.pass == Pass::Backward || action.pass == Pass::BackwardWeight)
      --inFlight[best];
    timeline.makespan = std::max(timeline.makespan, end);
    --remaining;
  }
  return timeline;
}

void printSchedule(const Schedule &schedule, llvm::raw_ostream &os) {
  os << "pipeline schedule " << scheduleName(schedule.kind) << ": "
     << schedule.ranks << " ranks, " << schedule.chunks
     << " stage(s) per rank, " << schedule.microBatches << " micro-batches\n";
  for (int32_t r = 0; r < schedule.ranks; ++r) {
    os << "rank " << r << ":";
    for (const Action &action : schedule.actions[r])
      os << " " << describe(action);
    os << "\n";
  }
}

llvm::json::Array scheduleTraceEvents(const Schedule &schedule,
                                      const Timeline &timeline, int64_t pid,
                                      double microsecondsPerUnit) {
  llvm::json::Array events;
  for (int32_t r = 0; r < schedule.ranks; ++r)
    for (size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action &action = schedule.actions[r][i];
      auto [start, end] = timeline.spans[r][i];
      llvm::json::Object args;
      if (action.microBatch >= 0) {
        args["micro_batch"] = action.microBatch;
        args["stage"] = action.stage;
      }
      events.push_back(
          llvm::json::Object{{"name", describe(action)},
                             {"cat", passName(action.pass)},
                             {"ph", end > start ? "X" : "i"},
                             {"pid", pid},
                             {"tid", r},
                             {"ts", start * microsecondsPerUnit},
                             {"dur", (end - start) * microsecondsPerUnit},
                             {"args", std::move(args)}});
    }
  return events;
}

void writeScheduleTrace(const Schedule &schedule, const Timeline &timeline,
                        llvm::raw_ostream &os) {
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                   {"traceEvents",
                                    scheduleTraceEvents(schedule, timeline, 0,
                                                        /*microsecondsPerUnit=*/
                                                        1000)},
                                   {"displayTimeUnit", "ms"}}))
     << "\n";
}

} // namespace megc::pipeline
