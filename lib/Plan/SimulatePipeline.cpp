//===- SimulatePipeline.cpp - a pipeline's step, played out -----------===//
//
// A pipeline compiles to one program per rank. Each is simulated alone
// (its passes' work, its transfers' and collectives' time); the schedule
// then says how long the ranks wait for each other: lib/Pipeline plays its
// actions out with a forward pass costing 1 and a backward pass 2 (the
// input and weight gradients 1 each, which zero-bubble schedules run
// apart), and the slowest rank's time is stretched by the largest share of
// the step a rank waits.
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
  // stages and back.
  int32_t micro = name == "train_step" ? pipeline.microBatches : 1;
  pipeline::PassCosts costs;
  costs.forward = 1;
  costs.backwardInput = 1;
  costs.backwardWeight = 1;
  Expected<pipeline::Schedule> schedule = pipeline::buildSchedule(
      micro >= pipeline.ranks ? *kind : pipeline::ScheduleKind::OneFOneB,
      pipeline.ranks, micro >= pipeline.ranks ? pipeline.chunks : 1,
      std::max(micro, pipeline.ranks), costs);
  if (!schedule)
    return schedule.takeError();
  Expected<pipeline::Timeline> timeline =
      pipeline::simulateSchedule(*schedule, costs);
  if (!timeline)
    return timeline.takeError();

  Simulation slowest;
  double flops = 0, modelFlops = 0;
  for (const EntryDesc *entry : ranks) {
    Simulation sim = simulateEntry(program, *entry, cluster);
    flops += sim.flops;
    modelFlops += sim.modelFlops;
    if (sim.stepSeconds > slowest.stepSeconds)
      slowest = std::move(sim);
  }
  slowest.bubbleFraction = timeline->bubbleFraction();
  slowest.stepSeconds /= 1.0 - std::min(slowest.bubbleFraction, 0.99);
  slowest.flops = flops / static_cast<double>(ranks.size());
  slowest.modelFlops = modelFlops / static_cast<double>(ranks.size());
  return slowest;
}

uint64_t peakBytesPerRank(const ProgramDesc &program, StringRef name) {
  uint64_t most = 0;
  for (const EntryDesc &entry : program.entries)
    if (entry.name == name)
      most = std::max(most, entry.plan.arenaBytes +
                                program.stateBytes(entry.pipelineRank));
  return most;
}

} // namespace megc::plan
