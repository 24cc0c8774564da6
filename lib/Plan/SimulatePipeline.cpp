//===- SimulatePipeline.cpp - a pipeline's step, played out -----------===//
//
// A pipeline compiles to one program per rank. Each is simulated alone
// (its passes' work, its transfers' and collectives' time); the schedule
// then says how long the ranks wait for each other: lib/Pipeline plays its
// actions out with each rank's passes taking what that rank's commands of
// each kind of pass (meg.pipeline_pass: forward, backward or input
// gradients, weight gradients) take in its simulation, per pass, and a
// rank's step is its program's time plus its wait; the step is the
// slowest rank's. A backward pass that sends before the rest of its work
// (its weight gradients and, on the last stage, the updates run after the
// send) is played as its two halves, sending between them.
//
//===----------------------------------------------------------------------===//

#include "megc/Pipeline/Schedule.h"
#include "megc/Plan/Simulate.h"
#include "megrt/Collectives.h"

using namespace llvm;

namespace megc::plan {

namespace {

/// Per command of a pipeline rank's program: whether it is a backward
/// pass's work that runs after the pass's sends (each batch of transfers
/// that sends starts as soon as the values sent exist).
std::vector<bool> afterBackwardSends(const EntryDesc &entry) {
  using PassKind = EntryDesc::PassKind;
  std::vector<bool> late(entry.commands.size(), false);
  PassKind last = PassKind::None;
  bool afterSend = false;
  for (size_t i = 0; i < entry.commands.size(); ++i) {
    const Command &command = entry.commands[i];
    if (const auto *collective = std::get_if<CollectiveCommand>(&command)) {
      if (megrt::collectiveInfo(collective->kind).form ==
          megrt::CollectiveForm::Send)
        afterSend = last == PassKind::Backward;
      continue;
    }
    if (std::holds_alternative<WaitCommand>(command)) {
      afterSend = false;
      continue;
    }
    PassKind kind =
        i < entry.passKind.size() ? entry.passKind[i] : PassKind::None;
    if (kind == PassKind::None)
      continue;
    if (kind != PassKind::Backward)
      afterSend = false;
    late[i] = afterSend;
    last = kind;
  }
  return late;
}

/// The schedule with each whole backward pass (BW) played as its input
/// gradients (B), the sends that follow it, and then its weight
/// gradients (W).
pipeline::Schedule splitBackwards(pipeline::Schedule schedule) {
  using pipeline::Pass;
  for (std::vector<pipeline::Action> &actions : schedule.actions) {
    std::vector<pipeline::Action> split;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (actions[i].pass != Pass::Backward) {
        split.push_back(actions[i]);
        continue;
      }
      pipeline::Action weight = actions[i];
      weight.pass = Pass::BackwardWeight;
      split.push_back(actions[i]);
      split.back().pass = Pass::BackwardInput;
      while (i + 1 < actions.size() &&
             actions[i + 1].pass == Pass::SendGradient)
        split.push_back(actions[++i]);
      split.push_back(weight);
    }
    actions = std::move(split);
  }
  return schedule;
}

} // namespace

llvm::Expected<Simulation> simulateStep(const ProgramDesc &program,
                                        StringRef name,
                                        const Cluster &cluster) {
  std::vector<const EntryDesc *> ranks;
  for (const EntryDesc &entry : program.entries)
    if (entry.name == name)
      ranks.push_back(&entry);
  if (ranks.empty())
    return createStringError(inconvertibleErrorCode(),
                             "the program has no entry '" + name + "'");
  if (!program.pipeline || ranks.size() == 1)
    return simulateEntry(program, *ranks.front(), cluster);

  const ProgramDesc::Pipeline &pipeline = *program.pipeline;
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(pipeline.schedule);
  if (!kind)
    return createStringError(inconvertibleErrorCode(),
                             "unknown pipeline schedule '" + pipeline.schedule +
                                 "'");
  // Entries other than the training step run one micro-batch through the
  // stages and back. The schedule is built as the split built it (unit
  // costs), which fixes each rank's order.
  int32_t micro = name == "train_step" ? pipeline.microBatches : 1;
  pipeline::PassCosts unit;
  Expected<pipeline::Schedule> schedule = pipeline::buildSchedule(
      micro >= pipeline.ranks ? *kind : pipeline::ScheduleKind::OneFOneB,
      pipeline.ranks, micro >= pipeline.ranks ? pipeline.chunks : 1,
      std::max(micro, pipeline.ranks), unit);
  if (!schedule)
    return schedule.takeError();
  if (static_cast<int32_t>(ranks.size()) != schedule->ranks)
    return createStringError(inconvertibleErrorCode(),
                             "the pipeline has " + Twine(schedule->ranks) +
                                 " ranks, the program " + Twine(ranks.size()) +
                                 " programs of '" + name + "'");

  // Each rank's program alone, and the time of its passes by kind (the
  // commands' meg.pipeline_pass) per pass of that kind in its schedule.
  using PassKind = EntryDesc::PassKind;
  std::vector<Simulation> sims;
  std::vector<pipeline::PassCosts> rankCosts(ranks.size());
  bool timed = true;
  // A whole backward pass's work after its sends, per rank: where any
  // rank has some, every whole backward is played as B, sends, W.
  std::vector<double> lateSeconds(ranks.size(), 0);
  for (auto [index, entry] : llvm::enumerate(ranks)) {
    sims.push_back(simulateEntry(program, *entry, cluster));
    std::vector<bool> late = afterBackwardSends(*entry);
    for (const SimEvent &event : sims.back().events)
      if (!event.comm && event.command < late.size() && late[event.command])
        lateSeconds[index] += event.end - event.start;
  }
  if (llvm::any_of(lateSeconds, [](double s) { return s > 0; }))
    *schedule = splitBackwards(std::move(*schedule));
  for (auto [index, entry] : llvm::enumerate(ranks)) {
    int32_t rank = std::max(entry->pipelineRank, 0);
    double seconds[3] = {0, 0, 0};
    for (const SimEvent &event : sims[index].events)
      if (!event.comm && event.command < entry->passKind.size() &&
          entry->passKind[event.command] != PassKind::None)
        seconds[static_cast<int>(entry->passKind[event.command])] +=
            event.end - event.start;
    // A whole backward's work after its sends is its W half.
    seconds[1] -= lateSeconds[index];
    seconds[2] += lateSeconds[index];
    double count[3] = {0, 0, 0};
    for (const pipeline::Action &action : schedule->actions[rank])
      switch (action.pass) {
      case pipeline::Pass::Forward:
        ++count[0];
        break;
      case pipeline::Pass::Backward:
      case pipeline::Pass::BackwardInput:
        ++count[1];
        break;
      case pipeline::Pass::BackwardWeight:
        ++count[2];
        break;
      default:
        break;
      }
    pipeline::PassCosts &costs = rankCosts[rank];
    costs.forward = count[0] ? seconds[0] / count[0] : 0;
    costs.backwardInput = count[1] ? seconds[1] / count[1] : 0;
    costs.backwardWeight = count[2] ? seconds[2] / count[2] : 0;
    // A backward pass that is not split holds the weight gradients too.
    if (!count[2])
      costs.backwardInput += count[1] ? seconds[2] / count[1] : 0;
    costs.transfer = 0;
    timed = timed && seconds[0] > 0;
  }
  // Without the records (an artifact compiled before them), a forward
  // pass costs 1 and a backward 2 everywhere.
  Expected<pipeline::Timeline> timeline = pipeline::simulateSchedule(
      *schedule, unit,
      timed ? ArrayRef<pipeline::PassCosts>(rankCosts)
            : ArrayRef<pipeline::PassCosts>());
  if (!timeline)
    return timeline.takeError();

  // A rank's step: its program's time plus the time it waits for its
  // neighbours (the schedule's makespan less its passes); the step is the
  // slowest rank's.
  Simulation slowest;
  double flops = 0, modelFlops = 0, worstIdle = 0;
  for (auto [entry, sim] : llvm::zip(ranks, sims)) {
    int32_t rank = std::max(entry->pipelineRank, 0);
    flops += sim.flops;
    modelFlops += sim.modelFlops;
    double idle = timed
                      ? timeline->makespan - timeline->busy[rank]
                      : sim.stepSeconds * timeline->bubbleFraction() /
                            (1.0 - std::min(timeline->bubbleFraction(), 0.99));
    if (sim.stepSeconds + idle > slowest.stepSeconds) {
      worstIdle = idle;
      slowest = std::move(sim);
      slowest.stepSeconds += idle;
    }
  }
  slowest.bubbleFraction =
      slowest.stepSeconds > 0 ? worstIdle / slowest.stepSeconds : 0;
  slowest.flops = flops / static_cast<double>(ranks.size());
  slowest.modelFlops = modelFlops / static_cast<double>(ranks.size());
  if (timed) {
    slowest.schedule =
        std::make_shared<const pipeline::Schedule>(std::move(*schedule));
    slowest.timeline =
        std::make_shared<const pipeline::Timeline>(std::move(*timeline));
  }
  return slowest;
}

const EntryDesc *largestRank(const ProgramDesc &program, StringRef name) {
  const EntryDesc *largest = nullptr;
  uint64_t most = 0;
  for (const EntryDesc &entry : program.entries) {
    if (entry.name != name)
      continue;
    uint64_t bytes =
        entry.plan.arenaBytes + program.stateBytes(entry.pipelineRank);
    if (!largest || bytes > most) {
      largest = &entry;
      most = bytes;
    }
  }
  return largest;
}

uint64_t peakBytesPerRank(const ProgramDesc &program, StringRef name) {
  const EntryDesc *largest = largestRank(program, name);
  return largest ? largest->plan.arenaBytes +
                       program.stateBytes(largest->pipelineRank)
                 : 0;
}

} // namespace megc::plan
