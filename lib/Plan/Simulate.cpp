//===- Simulate.cpp - a compiled step played out on a cluster ------------===//
//
// Costs each command of an entry from what the compiler recorded in it
// (shapes, buffers, groups) and plays the stream out: the compute stream
// runs commands in order; a blocking collective holds both streams; a
// started one runs on the communication stream from the later of its issue
// and the stream's previous transfer, and its wait holds the compute stream
// until it ends.
//
//===----------------------------------------------------------------------===//

#include "megc/Plan/Simulate.h"

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megrt/Collectives.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>

namespace megc::plan {
namespace {

std::string dtypeName(mlir::Type type) {
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  return "f32";
}

/// The ranks of `program`'s group `submesh`, and whether the group of rank
/// 0 stays inside one node (ranks numbered with the mesh's last axis
/// fastest, `devices` ranks a node).
std::pair<int64_t, bool> groupOf(const ProgramDesc &program, uint32_t submesh,
                                 int64_t devices) {
  if (!program.mesh || submesh >= program.submeshes.size())
    return {1, true};
  const auto &axes = program.mesh->axes;
  int64_t size = 1, lastRank = 0, stride = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    if (llvm::is_contained(program.submeshes[submesh], axes[i].first)) {
      size *= axes[i].second;
      lastRank += (axes[i].second - 1) * stride;
    }
    stride *= axes[i].second;
  }
  return {size, lastRank < devices};
}

/// The bytes a command's buffers hold: what a memory-bound command reads
/// and writes.
double bytesOf(const EntryDesc &entry, llvm::ArrayRef<uint32_t> buffers) {
  double bytes = 0;
  for (uint32_t buffer : buffers)
    if (buffer < entry.buffers.size())
      bytes += static_cast<double>(entry.buffers[buffer].sizeBytes());
  return bytes;
}

double bytesOfType(mlir::Type type) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(type);
  return static_cast<double>(tensor.getNumElements()) *
         (tensor.getElementType().getIntOrFloatBitWidth() / 8);
}

/// The bytes a kernel reads of its argument `arg`: all of it, unless every
/// use reads a part (a slice, the rows a gather or an embedding picks),
/// then what those parts hold.
double bytesRead(mlir::BlockArgument arg) {
  double read = 0;
  for (mlir::OpOperand &use : arg.getUses()) {
    mlir::Operation *user = use.getOwner();
    bool part =
        mlir::isa<mlir::meg::SliceOp>(user) ||
        (use.getOperandNumber() == 0 &&
         mlir::isa<mlir::meg::GatherRowsOp, mlir::meg::EmbeddingOp>(user));
    if (!part)
      return bytesOfType(arg.getType());
    read += bytesOfType(user->getResult(0).getType());
  }
  return std::min(read, bytesOfType(arg.getType()));
}

/// The bytes a kernel launch reads and writes: its outputs, and of each
/// input what the kernel's body reads (from its tensor function in the
/// program's kernel module; all of the buffer without one).
double launchBytes(const ProgramDesc &program, const EntryDesc &entry,
                   const LaunchCommand &launch) {
  mlir::func::FuncOp kernel;
  if (program.kernelModule && launch.kernel < program.kernels.size())
    kernel = mlir::ModuleOp(program.kernelModule.get())
                 .lookupSymbol<mlir::func::FuncOp>(
                     program.kernels[launch.kernel].name);
  if (!kernel || kernel.isExternal())
    return bytesOf(entry, launch.args);
  double bytes = 0;
  unsigned inputs = kernel.getNumArguments();
  for (auto [i, buffer] : llvm::enumerate(launch.args)) {
    if (buffer >= entry.buffers.size())
      continue;
    double size = static_cast<double>(entry.buffers[buffer].sizeBytes());
    if (i < inputs)
      size = std::min(size, bytesRead(kernel.getArgument(i)));
    bytes += size;
  }
  return bytes;
}

} // namespace

const char *costClassName(CostClass cls) {
  switch (cls) {
  case CostClass::Gemm:
    return "gemm";
  case CostClass::Attention:
    return "attention";
  case CostClass::Memory:
    return "memory";
  case CostClass::Collective:
    return "collective";
  case CostClass::Wait:
    return "wait";
  }
  return "?";
}

CommandCost commandCost(const ProgramDesc &program, const EntryDesc &entry,
                        size_t index, const Cluster &cluster) {
  CommandCost cost;
  const Command &command = entry.commands[index];
  if (const auto *gemm = std::get_if<GemmCommand>(&command)) {
    cost.cls = CostClass::Gemm;
    cost.work =
        2.0 * static_cast<double>(gemm->m) * gemm->n * gemm->k * gemm->batch;
    cost.dtype = dtypeName(entry.buffers[gemm->a].type.getElementType());
  } else if (const auto *attention = std::get_if<AttentionCommand>(&command)) {
    // As EntryDesc::flops counts them.
    double forward = 2.0 * static_cast<double>(attention->batch) *
                     attention->heads * attention->seqQ * attention->seqKv *
                     (attention->headDim + attention->valueDim);
    if (attention->causal)
      forward /= 2;
    cost.cls = CostClass::Attention;
    cost.work = attention->backward ? 2.5 * forward : forward;
    cost.dtype = dtypeName(entry.buffers[attention->q].type.getElementType());
  } else if (const auto *launch = std::get_if<LaunchCommand>(&command)) {
    cost.work = launchBytes(program, entry, *launch);
  } else if (const auto *copy = std::get_if<CopyCommand>(&command)) {
    cost.work = 2.0 * static_cast<double>(copy->bytes);
  } else if (const auto *call = std::get_if<LibraryCallCommand>(&command)) {
    llvm::SmallVector<uint32_t> buffers;
    for (int32_t operand : call->operands)
      if (operand >= 0)
        buffers.push_back(static_cast<uint32_t>(operand));
    cost.work = bytesOf(entry, buffers);
  } else if (const auto *collective =
                 std::get_if<CollectiveCommand>(&command)) {
    const megrt::CollectiveInfo &info = megrt::collectiveInfo(collective->kind);
    auto [size, intra] =
        groupOf(program, collective->submesh, cluster.node.devices);
    uint64_t elementBytes = entry.buffers[collective->src]
                                .type.getElementType()
                                .getIntOrFloatBitWidth() /
                            8;
    if (!info.communicates || size == 1) {
      // A local copy of this rank's piece (or a group of one).
      cost.work = 2.0 *
                  static_cast<double>(info.destinationElements(
                      collective->count, static_cast<uint64_t>(size))) *
                  elementBytes;
      return cost;
    }
    cost.cls = CostClass::Collective;
    cost.work =
        info.sentElements(collective->count, static_cast<uint64_t>(size)) *
        static_cast<double>(elementBytes);
    cost.intraNode = intra;
    // The steps of a ring (an all-reduce goes round twice); a shift is one
    // transfer.
    cost.steps = info.sent == megrt::CollectiveTraffic::TwiceShare
                     ? 2 * (size - 1)
                 : info.sent == megrt::CollectiveTraffic::Source ? 1
                                                                 : size - 1;
  } else {
    cost.cls = CostClass::Wait;
  }
  return cost;
}

double commandSeconds(const CommandCost &cost, const Cluster &cluster,
                      bool inGraph) {
  const Cluster::Efficiency &e = cluster.efficiency;
  double launch = inGraph ? e.graphLaunchSeconds : e.launchSeconds;
  switch (cost.cls) {
  case CostClass::Gemm: {
    double efficiency = e.gemm * cost.work / (cost.work + e.gemmHalfFlops);
    return launch + cost.work / (cluster.peakFor(cost.dtype) * efficiency);
  }
  case CostClass::Attention:
    return launch + cost.work / (cluster.peakFor(cost.dtype) * e.attention);
  case CostClass::Memory:
    return launch + cost.work / (cluster.device.memoryBandwidth * e.memory);
  case CostClass::Collective: {
    double bandwidth = cost.intraNode ? cluster.node.linkBandwidth * e.intraNode
                                      : cluster.network.bandwidth * e.interNode;
    double latency =
        cost.intraNode ? cluster.node.linkLatency : cluster.network.latency;
    return launch + static_cast<double>(cost.steps) * latency +
           cost.work / bandwidth;
  }
  case CostClass::Wait:
    return 0;
  }
  return 0;
}

Simulation simulateEntry(const ProgramDesc &program, const EntryDesc &entry,
                         const Cluster &cluster) {
  Simulation sim;
  double compute = 0, comm = 0;
  // The end of each started collective, by command index.
  std::map<uint32_t, double> started;
  std::map<std::string, double> flopsByDtype;
  // The commands replayed from captured CUDA graphs, and the first of each
  // graph, which pays the graph's launch.
  std::vector<bool> inGraph(entry.commands.size(), false),
      graphStart(entry.commands.size(), false);
  for (const GraphRegionDesc &region : entry.graphs) {
    if (region.count == 0 || region.first >= entry.commands.size())
      continue;
    graphStart[region.first] = true;
    for (uint32_t i = region.first;
         i < region.first + region.count && i < entry.commands.size(); ++i)
      inGraph[i] = true;
  }
  for (size_t index = 0; index < entry.commands.size(); ++index) {
    const Command &command = entry.commands[index];
    CommandCost cost = commandCost(program, entry, index, cluster);
    double seconds = commandSeconds(cost, cluster, inGraph[index]);
    if (graphStart[index])
      seconds += cluster.efficiency.launchSeconds;
    bool recomputed =
        index < entry.recomputed.size() && entry.recomputed[index];
    SimEvent event{static_cast<uint32_t>(index), "", cost.cls, false, 0, 0};
    if (cost.cls == CostClass::Gemm || cost.cls == CostClass::Attention) {
      sim.flops += cost.work;
      if (!recomputed)
        sim.modelFlops += cost.work;
      flopsByDtype[cost.dtype] += cost.work;
    }
    if (const auto *wait = std::get_if<WaitCommand>(&command)) {
      auto it = started.find(wait->collective);
      double end = it == started.end() ? compute : it->second;
      if (end > compute) {
        event.start = compute;
        event.end = end;
        event.name = "wait";
        sim.events.push_back(event);
        compute = end;
      }
      continue;
    }
    const auto *collective = std::get_if<CollectiveCommand>(&command);
    if (cost.cls == CostClass::Collective) {
      sim.bytesSent += cost.work;
      sim.commSeconds += seconds;
      event.name = megrt::collectiveInfo(collective->kind).name;
      if (collective->async) {
        // Issued at the compute stream's time; the communication stream
        // runs one transfer at a time.
        event.comm = true;
        event.start = std::max(compute, comm);
        event.end = comm = event.start + seconds;
        started[static_cast<uint32_t>(index)] = comm;
      } else {
        event.start = std::max(compute, comm);
        event.end = compute = comm = event.start + seconds;
      }
      sim.secondsByClass[cost.cls] += seconds;
      sim.events.push_back(event);
      continue;
    }
    event.name = costClassName(cost.cls);
    event.start = compute;
    event.end = compute += seconds;
    sim.computeSeconds += seconds;
    if (recomputed)
      sim.recomputeSeconds += seconds;
    sim.secondsByClass[cost.cls] += seconds;
    sim.events.push_back(event);
  }
  sim.stepSeconds = std::max(compute, comm);
  sim.exposedCommSeconds = std::max(0.0, sim.stepSeconds - sim.computeSeconds);
  double most = -1;
  for (const auto &[dtype, flops] : flopsByDtype)
    if (flops > most) {
      most = flops;
      sim.flopsDtype = dtype;
    }
  return sim;
}

} // namespace megc::plan
