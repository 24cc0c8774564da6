//===- ScheduleUpdates.cpp - the meg-schedule-updates pass -------------===//
//
// Moves every op whose result a meg.param_store writes (an optimizer
// update, the rounding of a master weight, the step count) or the function
// returns (a gradient cast to its main_grads dtype) as early as its
// operands and the last read of the parameter it overwrites allow, together
// with the ops that only it needs (the gradient's cast, the micro-batch
// sum, the reads of its state). A gradient then dies at its update or
// output instead of living until the end, and the update can be computed
// in the parameter's own storage.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/IR/PipelinePass.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGSCHEDULEUPDATES
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// The later of two ops of one block (null is the block's start).
Operation *later(Operation *a, Operation *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a->isBeforeInBlock(b) ? b : a;
}

/// An op that writes nothing: moving it changes no value.
bool movable(Operation *op) {
  return isa<ParamRefOp>(op) || isMemoryEffectFree(op);
}

/// Whether every result of `op` is a scalar (rank-0) tensor: it costs no
/// memory to compute early, however many ops read it.
bool scalarResults(Operation *op) {
  return llvm::all_of(op->getResultTypes(), [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.getRank() == 0;
  });
}

class Scheduler {
public:
  explicit Scheduler(Block &block) : block(block) {
    // The ops of the block that read each parameter, through views and the
    // collectives that start from a read; and the first op of each pass of
    // a pipeline schedule (which never moves: nothing of its pass is
    // before it).
    for (Operation &op : block) {
      if (auto ref = dyn_cast<ParamRefOp>(&op))
        collectReaders(ref.getName(), ref.getResult());
      if (Attribute pass = op.getAttr(MegDialect::kPipelinePassAttrName))
        firstOfPass.try_emplace(pass, &op);
    }
  }

  /// Moves `update` and the ops only it needs as early as they can go;
  /// returns whether anything moved.
  bool hoist(Operation *update) {
    llvm::SetVector<Operation *> cone;
    collectCone(update, cone);
    // Ops of the cone are in block order (a producer before its users), so
    // each one's operands are at their final places when it moves.
    SmallVector<Operation *> ordered(cone.begin(), cone.end());
    llvm::sort(ordered,
               [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    bool moved = false;
    llvm::SmallPtrSet<Operation *, 8> floating;
    for (Operation *op : ordered)
      moved |= moveEarly(op, update, floating);
    // What depends on nothing (parameter reads, constants, the step count)
    // goes right before its first user, the last of them first.
    for (Operation *op : llvm::reverse(ordered)) {
      if (!floating.contains(op))
        continue;
      Operation *first = nullptr;
      for (Operation *user : op->getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (top && (!first || top->isBeforeInBlock(first)))
          first = top;
      }
      if (first && first->isBeforeInBlock(op)) {
        op->moveBefore(first);
        placed.insert(op);
        moved = true;
      }
    }
    return moved;
  }

private:
  void collectReaders(StringRef name, Value value) {
    for (Operation *user : value.getUsers()) {
      Operation *top = block.findAncestorOpInBlock(*user);
      if (!top)
        continue;
      readers[name].insert(top);
      auto collective = dyn_cast<CollectiveOpInterface>(user);
      if (isa<ReshapeOp>(user) || (collective && collective.isStarted()))
        collectReaders(name, user->getResult(0));
    }
  }

  /// `op` and, recursively, the producers it alone needs: movable ops of
  /// this block whose every user is in the cone, and movable scalars.
  void collectCone(Operation *op, llvm::SetVector<Operation *> &cone) {
    if (!cone.insert(op))
      return;
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || producer->getBlock() != &block || !movable(producer) ||
          producer->getNumRegions() != 0)
        continue;
      bool privateToCone = llvm::all_of(producer->getUsers(), [&](Operation *u) {
        return cone.contains(block.findAncestorOpInBlock(*u));
      });
      if (privateToCone || scalarResults(producer))
        collectCone(producer, cone);
    }
  }

  /// Places `op` right after the last op it must follow: the producers of
  /// its operands and, for a result stored into a parameter, every other
  /// read of that parameter. An op that must follow none of them, or only
  /// floating ones, floats (the caller places it). Never moves an op later.
  bool moveEarly(Operation *op, Operation *update,
                 llvm::SmallPtrSetImpl<Operation *> &floating) {
    Operation *after = nullptr;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        if (Operation *top = block.findAncestorOpInBlock(*producer);
            top && !floating.contains(top))
          after = later(after, top);
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (auto store = dyn_cast<ParamStoreOp>(user))
          for (Operation *reader : readers.lookup(store.getName()))
            if (reader != op)
              after = later(after, reader);
    if (!after) {
      floating.insert(op);
      return false;
    }
    if (after == op || !after->isBeforeInBlock(op))
      return false;
    // In a pipeline rank's program, an op of a weight-gradient pass stays
    // in it: zero-bubble schedules delay those passes to fill the bubble,
    // after the input-gradient pass has sent its result (the updates of a
    // stage's last micro-batch are in its last weight pass).
    if (std::optional<PipelinePass> pass = pipelinePassOf(op);
        pass && pass->kind == PipelinePass::Weight)
      after = later(after, firstOfPass.lookup(
                               op->getAttr(MegDialect::kPipelinePassAttrName)));
    // Nor does an update move above a send: another rank waits for it.
    if (op == update)
      for (Operation *it = op->getPrevNode(); it && it != after;
           it = it->getPrevNode())
        if (isa<SendStartOp>(it)) {
          after = it;
          break;
        }
    if (after == op)
      return false;
    // After the ops moved behind `after` before it, so that updates keep
    // their order.
    Operation *next = after->getNextNode();
    while (next != op && placed.contains(next))
      next = next->getNextNode();
    placed.insert(op);
    if (next == op)
      return false;
    op->moveBefore(next);
    return true;
  }

  Block &block;
  llvm::StringMap<llvm::SetVector<Operation *>> readers;
  llvm::DenseMap<Attribute, Operation *> firstOfPass;
  /// The ops this schedule has placed.
  llvm::DenseSet<Operation *> placed;
};

struct MegScheduleUpdatesPass
    : public mlir::meg::impl::MegScheduleUpdatesBase<MegScheduleUpdatesPass> {
  using MegScheduleUpdatesBase::MegScheduleUpdatesBase;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // The ops whose results leave the arena, in block order: a store
      // writes them, or the function returns them (and nothing else reads
      // them: they are computed in the output's buffer).
      SmallVector<Operation *> updates;
      for (Operation &op : block) {
        if (isa<ParamStoreOp>(op) || !movable(&op))
          continue;
        bool leaves = llvm::any_of(op.getResults(), [](Value result) {
          return llvm::any_of(result.getUsers(),
                              [](Operation *u) { return isa<ParamStoreOp>(u); }) ||
                 (result.hasOneUse() &&
                  isa<func::ReturnOp>(*result.getUsers().begin()));
        });
        if (leaves)
          updates.push_back(&op);
      }
      Scheduler scheduler(block);
      for (Operation *update : updates)
        if (scheduler.hoist(update))
          ++numMoved;
    }
  }
};

} // namespace
