//===- PlanMemory.cpp - the megrt-plan-memory pass -------------------===//
//
// Static arena offsets from liveness. Every arena buffer lives from the
// first command with a memory effect on it (or on a view of it) to the
// last; buffers are placed largest first at the lowest 64-byte aligned
// offset that does not overlap a placed buffer with an intersecting
// lifetime.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Megrt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace megc::rt {
#define GEN_PASS_DEF_MEGRTPLANMEMORY
#include "megc/Dialect/Megrt/Transforms/Passes.h.inc"
} // namespace megc::rt

using namespace mlir;
using namespace megc::rt;

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

/// The storage a buffer is: itself, or what it views.
Value rootOf(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewOp>())
    buffer = view.getSource();
  return buffer;
}

/// The buffers a command has a memory effect on, their storage, in operand
/// order (once each).
SmallVector<Value, 8> touchedRoots(Operation *command) {
  SmallVector<Value, 8> roots;
  auto effects = dyn_cast<MemoryEffectOpInterface>(command);
  if (!effects)
    return roots;
  SmallVector<MemoryEffects::EffectInstance, 8> list;
  effects.getEffects(list);
  for (const MemoryEffects::EffectInstance &effect : list)
    if (Value value = effect.getValue()) {
      Value root = rootOf(value);
      if (!llvm::is_contained(roots, root))
        roots.push_back(root);
    }
  return roots;
}

struct MegrtPlanMemoryPass
    : public megc::rt::impl::MegrtPlanMemoryBase<MegrtPlanMemoryPass> {
  void runOnOperation() override {
    EntryOp entry = getOperation();
    // The commands in order, and what each touches.
    std::vector<Operation *> commands;
    std::vector<SmallVector<Value, 8>> touched;
    for (Operation &op : entry.getBody().front())
      if (!op.hasTrait<BufferDeclaration>()) {
        commands.push_back(&op);
        touched.push_back(touchedRoots(&op));
      }

    // The arena buffers' lifetimes, in the order they are declared.
    llvm::DenseMap<Value, size_t> lifetimeOf;
    struct Live {
      ArenaOp buffer;
      Interval interval;
      uint64_t bytes, size;
    };
    std::vector<Live> order;
    for (auto [index, roots] : llvm::enumerate(touched))
      for (Value root : roots)
        if (auto arena = root.getDefiningOp<ArenaOp>()) {
          auto [it, inserted] = lifetimeOf.try_emplace(root, order.size());
          if (inserted) {
            uint64_t bytes =
                cast<BufferType>(arena.getBuffer().getType()).getBytes();
            order.push_back({arena, {}, bytes, alignUp(bytes)});
          }
          order[it->second].interval.touch(static_cast<int64_t>(index));
        }
    std::vector<size_t> declared(order.size());
    for (size_t i = 0; i < order.size(); ++i)
      declared[i] = i;
    // Largest first; equal sizes in the order of declaration.
    std::sort(declared.begin(), declared.end(), [&](size_t a, size_t b) {
      Operation *opA = order[a].buffer, *opB = order[b].buffer;
      if (order[a].bytes != order[b].bytes)
        return order[a].bytes > order[b].bytes;
      return opA->isBeforeInBlock(opB);
    });
    std::vector<Live> sorted;
    for (size_t i : declared)
      sorted.push_back(order[i]);
    order = std::move(sorted);

    // Placed buffers by the spans of commands their lifetimes touch, so
    // that a buffer meets only those it may overlap in time (a program of
    // many micro-batches has tens of thousands of short-lived buffers).
    constexpr int64_t kSpan = 64;
    std::vector<std::vector<uint32_t>> placedIn(commands.size() / kSpan + 1);
    std::vector<uint32_t> seen(order.size(), UINT32_MAX);
    std::vector<uint64_t> offsets(order.size(), 0);
    uint64_t arenaBytes = 0, unplannedBytes = 0;
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (auto [index, live] : llvm::enumerate(order)) {
      unplannedBytes += live.bytes;
      // Conflicting placements sorted by offset; take the first gap.
      taken.clear();
      for (int64_t span = live.interval.first / kSpan;
           span <= live.interval.last / kSpan; ++span)
        for (uint32_t other : placedIn[span]) {
          if (seen[other] == index)
            continue;
          seen[other] = static_cast<uint32_t>(index);
          if (order[other].interval.overlaps(live.interval))
            taken.push_back(
                {offsets[other], offsets[other] + order[other].size});
        }
      std::sort(taken.begin(), taken.end());
      uint64_t offset = 0;
      for (auto [begin, end] : taken) {
        if (offset + live.size <= begin)
          break;
        offset = std::max(offset, end);
      }
      offsets[index] = offset;
      arenaBytes = std::max(arenaBytes, offset + live.size);
      for (int64_t span = live.interval.first / kSpan;
           span <= live.interval.last / kSpan; ++span)
        placedIn[span].push_back(static_cast<uint32_t>(index));
    }
    Builder builder(entry.getContext());
    for (auto [index, live] : llvm::enumerate(order))
      live.buffer.setOffsetAttr(
          builder.getI64IntegerAttr(static_cast<int64_t>(offsets[index])));

    // The most bytes live at once: each buffer counts from its first
    // command to its last; at one command, what ends before it leaves
    // before what starts there.
    std::vector<std::pair<int64_t, int64_t>> changes;
    for (const Live &live : order) {
      auto bytes = static_cast<int64_t>(live.bytes);
      changes.push_back({live.interval.first, bytes});
      changes.push_back({live.interval.last + 1, -bytes});
    }
    std::sort(changes.begin(), changes.end());
    int64_t liveBytes = 0;
    uint64_t peakBytes = 0;
    for (auto [command, bytes] : changes) {
      liveBytes += bytes;
      peakBytes = std::max(peakBytes, static_cast<uint64_t>(liveBytes));
    }

    entry.setArenaBytesAttr(builder.getI64IntegerAttr(arenaBytes));
    entry.setPeakBytesAttr(builder.getI64IntegerAttr(peakBytes));
    entry.setUnplannedBytesAttr(builder.getI64IntegerAttr(unplannedBytes));
    if (std::optional<int64_t> loss = entry.getLossOutput()) {
      int64_t at = lossCommand(*loss, commands, touched);
      uint64_t held = 0;
      if (at >= 0)
        for (const Live &live : order)
          if (live.interval.first <= at && at <= live.interval.last)
            held += live.bytes;
      entry.setLiveAtLossBytesAttr(builder.getI64IntegerAttr(held));
    }
  }

  /// The command that first computes the loss: the first to touch output
  /// `loss`, or where that is a copy or a collective of a value computed
  /// earlier (a reduction over the data-parallel ranks placed late), the
  /// first to touch that value, followed back a few hops.
  static int64_t lossCommand(int64_t loss, ArrayRef<Operation *> commands,
                             ArrayRef<SmallVector<Value, 8>> touched) {
    llvm::DenseMap<Value, int64_t> firstTouch;
    int64_t at = -1;
    for (auto [index, roots] : llvm::enumerate(touched))
      for (Value root : roots) {
        firstTouch.try_emplace(root, static_cast<int64_t>(index));
        auto output = root.getDefiningOp<OutputOp>();
        if (output && output.getIndex() == loss && at < 0)
          at = static_cast<int64_t>(index);
      }
    for (int hops = 0; at >= 0 && hops < 8; ++hops) {
      Value source;
      if (auto copy = dyn_cast<CopyOp>(commands[at]))
        source = copy.getSrc();
      else if (auto collective = dyn_cast<CollectiveOp>(commands[at]))
        source = collective.getSrc();
      if (!source)
        break;
      auto it = firstTouch.find(rootOf(source));
      if (it == firstTouch.end() || it->second >= at)
        break;
      at = it->second;
    }
    return at;
  }
};

} // namespace
