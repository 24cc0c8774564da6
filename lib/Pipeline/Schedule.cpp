//===- Schedule.cpp - building pipeline schedules -------------------------===//
//
// Each schedule is first an order of each rank's compute passes; transfers
// are then placed next to the passes that produce and use them. The
// zero-bubble order comes from list-scheduling 1F1B's passes on the cost
// model: a rank whose next F or B must wait runs its oldest deferred W.
//
//===----------------------------------------------------------------------===//

#include "megc/Pipeline/Schedule.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

namespace megc::pipeline {

llvm::StringRef scheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "?";
}

std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ScheduleKind>>(name)
      .Case("1f1b", ScheduleKind::OneFOneB)
      .Case("interleaved", ScheduleKind::Interleaved)
      .Case("zb-h1", ScheduleKind::ZeroBubbleH1)
      .Default(std::nullopt);
}

double PassCosts::of(Pass pass) const {
  switch (pass) {
  case Pass::Forward:
    return forward;
  case Pass::Backward:
    return backwardInput + backwardWeight;
  case Pass::BackwardInput:
    return backwardInput;
  case Pass::BackwardWeight:
    return backwardWeight;
  default:
    return 0;
  }
}

llvm::StringRef passName(Pass pass) {
  switch (pass) {
  case Pass::Forward:
    return "F";
  case Pass::Backward:
    return "BW";
  case Pass::BackwardInput:
    return "B";
  case Pass::BackwardWeight:
    return "W";
  case Pass::SendActivation:
    return "send-act";
  case Pass::RecvActivation:
    return "recv-act";
  case Pass::SendGradient:
    return "send-grad";
  case Pass::RecvGradient:
    return "recv-grad";
  case Pass::OptimizerStep:
    return "optimizer";
  }
  return "?";
}

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// 1F1B on one chunk per rank: min(p - r - 1, m) warm-up forwards, then
/// one forward and one backward in turn, then the remaining backwards.
std::vector<Action> oneFOneB(int32_t rank, int32_t ranks, int32_t microBatches,
                             Pass backward) {
  std::vector<Action> order;
  int32_t warmup = std::min(ranks - rank - 1, microBatches);
  for (int32_t i = 0; i < warmup; ++i)
    order.push_back({Pass::Forward, i, rank});
  for (int32_t i = 0; i + warmup < microBatches; ++i) {
    order.push_back({Pass::Forward, i + warmup, rank});
    order.push_back({backward, i, rank});
  }
  for (int32_t i = microBatches - warmup; i < microBatches; ++i)
    order.push_back({backward, i, rank});
  return order;
}

/// Megatron's interleaved order: the k-th forward runs chunk (k / p) % v
/// of micro-batch (k / (p v)) p + k % p, the k-th backward the chunks in
/// reverse; (p - r - 1) 2 + (v - 1) p warm-up forwards.
std::vector<Action> interleaved(int32_t rank, int32_t ranks, int32_t chunks,
                                int32_t microBatches) {
  int32_t total = microBatches * chunks;
  auto microBatch = [&](int32_t k) {
    return (k / (ranks * chunks)) * ranks + k % ranks;
  };
  auto forward = [&](int32_t k) {
    int32_t chunk = (k / ranks) % chunks;
    return Action{Pass::Forward, microBatch(k), chunk * ranks + rank};
  };
  auto backward = [&](int32_t k) {
    int32_t chunk = chunks - 1 - (k / ranks) % chunks;
    return Action{Pass::Backward, microBatch(k), chunk * ranks + rank};
  };
  int32_t warmup =
      std::min((ranks - rank - 1) * 2 + (chunks - 1) * ranks, total);
  std::vector<Action> order;
  for (int32_t k = 0; k < warmup; ++k)
    order.push_back(forward(k));
  for (int32_t k = 0; k + warmup < total; ++k) {
    order.push_back(forward(k + warmup));
    order.push_back(backward(k));
  }
  for (int32_t k = total - warmup; k < total; ++k)
    order.push_back(backward(k));
  return order;
}

/// ZB-H1: each rank's 1F1B order of F and B passes, list-scheduled on the
/// costs in time order; a rank whose next pass cannot start yet runs its
/// oldest deferred W instead, and the rest of its W passes at the end. A
/// micro-batch's activations live from its F to its W: a rank that holds
/// as many as 1F1B's first stage does (p) runs a deferred W before its
/// next F, so that ZB-H1's activation memory is 1F1B's, as Qi et al.'s
/// ZB-H1 keeps it.
std::vector<std::vector<Action>>
zeroBubbleH1(int32_t ranks, int32_t microBatches, const PassCosts &costs) {
  std::vector<std::deque<Action>> base(ranks);
  for (int32_t r = 0; r < ranks; ++r)
    for (const Action &action :
         oneFOneB(r, ranks, microBatches, Pass::BackwardInput))
      base[r].push_back(action);
  std::vector<std::vector<Action>> order(ranks);
  std::vector<std::deque<Action>> deferred(ranks);
  std::vector<double> now(ranks, 0);
  // Per rank: the micro-batches whose F has run and whose W has not.
  std::vector<int32_t> inFlight(ranks, 0);
  // End times of the committed F and B passes by (micro-batch, stage).
  std::map<std::pair<int32_t, int32_t>, double> forwardEnd, backwardEnd;
  auto ready = [&](const Action &action) -> std::optional<double> {
    int32_t m = action.microBatch, s = action.stage;
    if (action.pass == Pass::Forward) {
      if (s == 0)
        return 0.0;
      auto it = forwardEnd.find({m, s - 1});
      if (it == forwardEnd.end())
        return std::nullopt;
      return it->second + costs.transfer;
    }
    // B: after the stage's own forward and the next stage's B.
    double at = forwardEnd.at({m, s});
    if (s == ranks - 1)
      return at;
    auto it = backwardEnd.find({m, s + 1});
    if (it == backwardEnd.end())
      return std::nullopt;
    return std::max(at, it->second + costs.transfer);
  };
  for (;;) {
    int32_t best = -1;
    double bestStart = std::numeric_limits<double>::infinity();
    bool bestIsW = false;
    for (int32_t r = 0; r < ranks; ++r) {
      double start;
      bool isW;
      if (base[r].empty()) {
        if (deferred[r].empty())
          continue;
        start = now[r], isW = true;
      } else if (base[r].front().pass == Pass::Forward &&
                 inFlight[r] >= ranks && !deferred[r].empty()) {
        start = now[r], isW = true;
      } else {
        std::optional<double> at = ready(base[r].front());
        if (at && *at <= now[r])
          start = now[r], isW = false;
        else if (!deferred[r].empty())
          start = now[r], isW = true;
        else if (at)
          start = *at, isW = false;
        else
          continue;
      }
      if (start < bestStart)
        best = r, bestStart = start, bestIsW = isW;
    }
    if (best < 0)
      break;
    Action action = bestIsW ? deferred[best].front() : base[best].front();
    if (bestIsW)
      deferred[best].pop_front();
    else
      base[best].pop_front();
    double end = bestStart + costs.of(action.pass);
    now[best] = end;
    if (action.pass == Pass::Forward) {
      forwardEnd[{action.microBatch, action.stage}] = end;
      ++inFlight[best];
    }
    if (action.pass == Pass::BackwardWeight)
      --inFlight[best];
    if (action.pass == Pass::BackwardInput) {
      backwardEnd[{action.microBatch, action.stage}] = end;
      deferred[best].push_back(
          {Pass::BackwardWeight, action.microBatch, action.stage});
    }
    order[best].push_back(action);
  }
  return order;
}

bool isBackward(Pass pass) {
  return pass == Pass::Backward || pass == Pass::BackwardInput;
}

/// The compute order of one rank with its transfers and optimizer step.
std::vector<Action> withTransfers(const std::vector<Action> &compute,
                                  const Schedule &schedule, int32_t rank) {
  std::vector<Action> actions;
  int32_t last = schedule.numStages() - 1;
  for (const Action &action : compute) {
    int32_t m = action.microBatch, s = action.stage;
    if (action.pass == Pass::Forward && s > 0 && schedule.rankOf(s - 1) != rank)
      actions.push_back({Pass::RecvActivation, m, s});
    if (isBackward(action.pass) && s < last && schedule.rankOf(s + 1) != rank)
      actions.push_back({Pass::RecvGradient, m, s});
    actions.push_back(action);
    if (action.pass == Pass::Forward && s < last &&
        schedule.rankOf(s + 1) != rank)
      actions.push_back({Pass::SendActivation, m, s});
    if (isBackward(action.pass) && s > 0 && schedule.rankOf(s - 1) != rank)
      actions.push_back({Pass::SendGradient, m, s});
  }
  actions.push_back({Pass::OptimizerStep, -1, -1});
  return actions;
}

} // namespace

llvm::Expected<Schedule> buildSchedule(ScheduleKind kind, int32_t ranks,
                                       int32_t chunks, int32_t microBatches,
                                       const PassCosts &costs) {
  if (ranks < 1)
    return error("pipeline: " + llvm::Twine(ranks) +
                 " ranks; a pipeline needs at least one");
  if (microBatches < 1)
    return error("pipeline: " + llvm::Twine(microBatches) +
                 " micro-batches; a pipeline needs at least one");
  if (kind == ScheduleKind::Interleaved) {
    if (chunks < 2)
      return error("pipeline: the interleaved schedule needs at least 2 "
                   "virtual stages per rank (--pp-virtual), got " +
                   llvm::Twine(chunks));
    if (microBatches % ranks != 0)
      return error("pipeline: the interleaved schedule needs micro-batches "
                   "in multiples of the pipeline ranks: " +
                   llvm::Twine(microBatches) + " micro-batches on " +
                   llvm::Twine(ranks) + " ranks");
  } else if (chunks != 1) {
    return error("pipeline: the " + scheduleName(kind) +
                 " schedule runs one stage per rank; " + llvm::Twine(chunks) +
                 " virtual stages need --pp-schedule interleaved");
  }
  Schedule schedule{kind, ranks, chunks, microBatches, {}};
  std::vector<std::vector<Action>> compute(ranks);
  if (kind == ScheduleKind::ZeroBubbleH1) {
    compute = zeroBubbleH1(ranks, microBatches, costs);
  } else {
    for (int32_t r = 0; r < ranks; ++r)
      compute[r] = kind == ScheduleKind::Interleaved
                       ? interleaved(r, ranks, chunks, microBatches)
                       : oneFOneB(r, ranks, microBatches, Pass::Backward);
  }
  for (int32_t r = 0; r < ranks; ++r)
    schedule.actions.push_back(withTransfers(compute[r], schedule, r));
  return schedule;
}

} // namespace megc::pipeline
