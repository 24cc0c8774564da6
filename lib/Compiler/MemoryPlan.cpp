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

  std::vector<uint32_t> order;
  for (auto &[buffer, interval] : lifetimes)
    order.push_back(buffer);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return entry.buffers[a].sizeBytes() > entry.buffers[b].sizeBytes();
  });

  MemoryPlan plan;
  std::vector<uint32_t> placed;
  for (uint32_t buffer : order) {
    uint64_t size = alignUp(entry.buffers[buffer].sizeBytes());
    plan.unplannedBytes += entry.buffers[buffer].sizeBytes();
    // Conflicting placements sorted by offset; take the first gap.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (uint32_t other : placed)
      if (lifetimes[other].overlaps(lifetimes[buffer]))
        taken.push_back({entry.buffers[other].offset,
                         entry.buffers[other].offset +
                             alignUp(entry.buffers[other].sizeBytes())});
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, end);
    }
    entry.buffers[buffer].offset = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
    placed.push_back(buffer);
  }
  // Views share their storage's placement.
  for (BufferDesc &buffer : entry.buffers)
    if (buffer.aliasOf >= 0)
      buffer.offset = entry.buffers[buffer.aliasOf].offset;

  for (size_t command = 0; command < entry.commands.size(); ++command) {
    uint64_t live = 0;
    for (auto &[buffer, interval] : lifetimes)
      if (interval.first <= static_cast<int64_t>(command) &&
          static_cast<int64_t>(command) <= interval.last)
        live += entry.buffers[buffer].sizeBytes();
    plan.peakBytes = std::max(plan.peakBytes, live);
  }
  entry.plan = plan;
}

} // namespace megc
