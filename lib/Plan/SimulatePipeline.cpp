//===- SimulatePipeline.cpp - a pipeline's step, played out -----------===//
//
// A pipeline compiles to one program per rank. Each is simulated alone
// (its passes' work, its transfers' and collectives' time); the schedule
// then says how long the ranks wait for each other: lib/Pipeline plays its
// actions out with each rank's passes taking what that rank's commands of
// each kind of pass (meg.pipeline_pass: forward, backward or input
// gradients, weight gradients) take in its simulation, per pass, and a
// rank's step is its program's time plus its wait; the step is the
// slowest rank's.
//
//===----------------------------------------------------------------------===//

#include "megc/Pipeline/Schedule.h"
#include "megc/Plan/Simulate.h"

using namespace llvm;

namespace megc::plan {

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
  for (const EntryDesc *entry : ranks) {
    sims.push_back(simulateEntry(program, *entry, cluster));
    int32_t rank = std::max(entry->pipelineRank, 0);
    double seconds[3] = {0, 0, 0};
    for (const SimEvent &event : sims.back().events)
      if (!event.comm && event.command < entry->passKind.size() &&
          entry->passKind[event.command] != PassKind::None)
        seconds[static_cast<int>(entry->passKind[event.command])] +=
            event.end - event.start;
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
