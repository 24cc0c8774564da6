//===- MemoryPlan.cpp - static arena offsets from liveness -------------===//
//
// Every intermediate lives from the command that writes it to the last
// command that reads it (views extend their storage's lifetime). Buffers
// are placed largest first at the lowest 64-byte aligned offset that does
// not overlap a placed buffer with an intersecting lifetime.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"

#include <algorithm>
#include <map>
#include <optional>

namespace megc {

namespace {
constexpr uint64_t kAlignment = 64;

uint64_t alignUp(uint64_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
}

struct Interval {
  int64_t first = -1, last = -1;
  void touch(int64_t command) {
    if (first < 0)
      first = command;
    last = std::max(last, command);
  }
  bool overlaps(const Interval &other) const {
    return first <= other.last && other.first <= last;
  }
};

/// The buffers a command reads or writes.
std::vector<uint32_t> buffersOf(const Command &command) {
  if (auto *launch = std::get_if<LaunchCommand>(&command))
    return launch->args;
  if (auto *gemm = std::get_if<GemmCommand>(&command)) {
    std::vector<uint32_t> used = {gemm->a, gemm->b, gemm->c};
    if (gemm->bias >= 0)
      used.push_back(gemm->bias);
    return used;
  }
  if (auto *attention = std::get_if<AttentionCommand>(&command)) {
    std::vector<uint32_t> used = {attention->q, attention->k, attention->v,
                                  attention->out};
    if (attention->backward)
      used.insert(used.end(), {attention->gradOut, attention->gradQ,
                               attention->gradK, attention->gradV});
    if (attention->stats >= 0)
      used.push_back(static_cast<uint32_t>(attention->stats));
    if (attention->positions >= 0)
      used.push_back(static_cast<uint32_t>(attention->positions));
    return used;
  }
  if (auto *call = std::get_if<LibraryCallCommand>(&command)) {
    std::vector<uint32_t> used;
    for (int32_t operand : call->operands)
      if (operand >= 0)
        used.push_back(static_cast<uint32_t>(operand));
    return used;
  }
  if (auto *collective = std::get_if<CollectiveCommand>(&command))
    return {collective->src, collective->dst};
  if (auto *wait = std::get_if<WaitCommand>(&command))
    return {wait->src, wait->dst};
  const auto &copy = std::get<CopyCommand>(command);
  return {copy.src, copy.dst};
}
} // namespace

void planMemory(EntryDesc &entry) {
  auto root = [&](uint32_t buffer) {
    int32_t alias = entry.buffers[buffer].aliasOf;
    return alias >= 0 ? static_cast<uint32_t>(alias) : buffer;
  };
  std::map<uint32_t, Interval> lifetimes;
  for (auto [index, command] : llvm::enumerate(entry.commands))
    for (uint32_t buffer : buffersOf(command))
      if (entry.buffers[root(buffer)].kind == BufferKind::Arena)
        lifetimes[root(buffer)].touch(index);

  // The arena buffers, largest first, with their lifetimes.
  struct Live {
    uint32_t buffer;
    Interval interval;
    uint64_t size;
  };
  std::vector<Live> order;
  for (auto &[buffer, interval] : lifetimes)
    order.push_back(
        {buffer, interval, alignUp(entry.buffers[buffer].sizeBytes())});
  std::stable_sort(order.begin(), order.end(),
                   [&](const Live &a, const Live &b) {
                     return entry.buffers[a.buffer].sizeBytes() >
                            entry.buffers[b.buffer].sizeBytes();
                   });

  // Placed buffers by the spans of commands their lifetimes touch, so that
  // a buffer meets only those it may overlap in time (a program of many
  // micro-batches has tens of thousands of short-lived buffers).
  constexpr int64_t kSpan = 64;
  std::vector<std::vector<uint32_t>> placedIn(entry.commands.size() / kSpan +
                                              1);
  std::vector<uint32_t> seen(order.size(), UINT32_MAX);
  MemoryPlan plan;
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  for (auto [index, live] : llvm::enumerate(order)) {
    plan.unplannedBytes += entry.buffers[live.buffer].sizeBytes();
    // Conflicting placements sorted by offset; take the first gap.
    taken.clear();
    for (int64_t span = live.interval.first / kSpan;
         span <= live.interval.last / kSpan; ++span)
      for (uint32_t other : placedIn[span]) {
        if (seen[other] == index)
          continue;
        seen[other] = static_cast<uint32_t>(index);
        const Live &placed = order[other];
        if (placed.interval.overlaps(live.interval)) {
          uint64_t begin = entry.buffers[placed.buffer].offset;
          taken.push_back({begin, begin + placed.size});
        }
      }
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + live.size <= begin)
        break;
      offset = std::max(offset, end);
    }
    entry.buffers[live.buffer].offset = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + live.size);
    for (int64_t span = live.interval.first / kSpan;
         span <= live.interval.last / kSpan; ++span)
      placedIn[span].push_back(static_cast<uint32_t>(index));
  }
  // Views share their storage's placement.
  for (BufferDesc &buffer : entry.buffers)
    if (buffer.aliasOf >= 0)
      buffer.offset = entry.buffers[buffer.aliasOf].offset;

  // The most bytes live at once: each buffer counts from its first command
  // to its last.
  std::vector<std::pair<int64_t, int64_t>> changes;
  for (const Live &live : order) {
    auto bytes = static_cast<int64_t>(entry.buffers[live.buffer].sizeBytes());
    changes.push_back({live.interval.first, bytes});
    changes.push_back({live.interval.last + 1, -bytes});
  }
  // At one command, what ends before it leaves before what starts there.
  std::sort(changes.begin(), changes.end());
  int64_t live = 0;
  for (auto [command, bytes] : changes) {
    live += bytes;
    plan.peakBytes = std::max(plan.peakBytes, static_cast<uint64_t>(live));
  }

  // What is live when the loss is first computed (a copy or a reduction
  // over the data-parallel ranks into the output, placed late, is
  // followed back to its source): in a step of one micro-batch, what the
  // forward keeps for the backward.
  int64_t lossOutput = -1;
  for (auto [index, output] : llvm::enumerate(entry.outputs))
    if (output.name == "loss")
      lossOutput = static_cast<int64_t>(index);
  std::map<uint32_t, int64_t> firstTouch;
  int64_t lossCommand = -1;
  for (auto [index, command] : llvm::enumerate(entry.commands))
    for (uint32_t buffer : buffersOf(command)) {
      firstTouch.try_emplace(root(buffer), static_cast<int64_t>(index));
      const BufferDesc &desc = entry.buffers[root(buffer)];
      if (desc.kind == BufferKind::Output && lossOutput >= 0 &&
          desc.index == static_cast<uint32_t>(lossOutput) && lossCommand < 0)
        lossCommand = static_cast<int64_t>(index);
    }
  for (int hops = 0; lossCommand >= 0 && hops < 8; ++hops) {
    const Command &command = entry.commands[lossCommand];
    std::optional<uint32_t> source;
    if (const auto *copy = std::get_if<CopyCommand>(&command))
      source = copy->src;
    else if (const auto *sum = std::get_if<CollectiveCommand>(&command))
      source = sum->src;
    if (!source || firstTouch[root(*source)] >= lossCommand)
      break;
    lossCommand = firstTouch[root(*source)];
  }
  if (lossCommand >= 0)
    for (const Live &held : order)
      if (held.interval.first <= lossCommand &&
          lossCommand <= held.interval.last)
        plan.liveAtLossBytes += entry.buffers[held.buffer].sizeBytes();
  entry.plan = plan;
}

} // namespace megc
