//===- Simulate.h - a compiled step played out on a cluster ------*- C++
//-*-===//
//
// A discrete-event simulation of one rank's command stream as the compiler
// built it: matrix products and attention by their FLOPs against the
// device's peak, kernels, copies and library kernels by the bytes of their
// buffers against its memory bandwidth, collectives by the bytes the rank
// sends against the link or network their group crosses, plus a latency
// per step of their ring. Two streams, as the runtime runs them: compute,
// and communication for started collectives, which a wait joins.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_PLAN_SIMULATE_H
#define MEGC_PLAN_SIMULATE_H

#include "megc/Compiler/Program.h"
#include "megc/Pipeline/Schedule.h"
#include "megc/Plan/Cluster.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace megc::plan {

/// What a command is costed as.
enum class CostClass { Gemm, Attention, Memory, Collective, Wait };

/// One command's cost: `work` in FLOPs (gemm, attention) or bytes (memory:
/// read and written; collective: sent), and the latency-bound steps of a
/// collective.
struct CommandCost {
  CostClass cls = CostClass::Memory;
  double work = 0;
  int64_t steps = 0;
  /// For a collective: whether its group stays inside a node.
  bool intraNode = true;
  /// The element type of a matrix product or attention ("bf16", "f32").
  std::string dtype = "f32";
};

/// The cost of command `index` of `entry`.
CommandCost commandCost(const ProgramDesc &program, const EntryDesc &entry,
                        size_t index, const Cluster &cluster);

/// Its duration on `cluster`, in seconds: issued alone, or replayed in a
/// captured CUDA graph (`inGraph`).
double commandSeconds(const CommandCost &cost, const Cluster &cluster,
                      bool inGraph = false);

struct SimEvent {
  uint32_t command;
  std::string name;
  CostClass cls;
  /// On the communication stream (a started collective).
  bool comm;
  double start, end;
};

struct Simulation {
  double stepSeconds = 0;
  /// Busy time of the compute stream, of communication (blocking and
  /// started collectives), and the part of the step in which the compute
  /// stream waits for communication.
  double computeSeconds = 0, commSeconds = 0, exposedCommSeconds = 0;
  /// Of the compute stream, the commands that recompute activations.
  double recomputeSeconds = 0;
  std::map<CostClass, double> secondsByClass;
  /// Of matrix products and attention on this rank; model FLOPs leave out
  /// recomputation.
  double flops = 0, modelFlops = 0;
  /// The dtype of most of those FLOPs, whose peak the utilisation uses.
  std::string flopsDtype = "f32";
  double bytesSent = 0;
  std::vector<SimEvent> events;
  /// Of a pipeline: the largest share of the step a rank waits for its
  /// neighbours (the schedule's bubble).
  double bubbleFraction = 0;
  /// Of a pipeline whose passes were timed from its ranks' programs: the
  /// schedule played out and its timeline, in seconds.
  std::shared_ptr<const pipeline::Schedule> schedule;
  std::shared_ptr<const pipeline::Timeline> timeline;
};

Simulation simulateEntry(const ProgramDesc &program, const EntryDesc &entry,
                         const Cluster &cluster);

/// The step of entry `name`: simulateEntry's, or for a pipeline (one
/// program per rank) each rank's program simulated alone and the schedule
/// played out over them (lib/Pipeline, each rank's passes as long as its
/// commands of that kind of pass take): the slowest rank's time plus its
/// wait, its FLOPs the mean of the ranks' (per device), its events the
/// slowest rank's.
llvm::Expected<Simulation> simulateStep(const ProgramDesc &program,
                                        llvm::StringRef name,
                                        const Cluster &cluster);
/// The most bytes one rank's program of entry `name` needs (arena plus
/// the parameters and state it holds), over the ranks of a pipeline.
uint64_t peakBytesPerRank(const ProgramDesc &program, llvm::StringRef name);
/// The rank's program of entry `name` that needs those bytes (the first of
/// the largest), or null when the program has no such entry.
const EntryDesc *largestRank(const ProgramDesc &program, llvm::StringRef name);

const char *costClassName(CostClass cls);

} // namespace megc::plan

#endif // MEGC_PLAN_SIMULATE_H
