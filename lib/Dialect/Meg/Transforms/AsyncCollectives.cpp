//===- AsyncCollectives.cpp - the meg-async-collectives pass -----------===//
//
// Splits each blocking collective that has work to overlap into a start
// right after its input and a wait right before its first reader.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGASYNCCOLLECTIVES
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Whether `value` is stored into a parameter, directly or through views:
/// the program lowering gathers such a weight straight into the
/// parameter's storage, which only the blocking form does.
bool reachesParamStore(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<ParamStoreOp>(user))
      return true;
    if (auto reshape = dyn_cast<ReshapeOp>(user))
      if (reachesParamStore(reshape.getResult()))
        return true;
  }
  return false;
}

/// Moves `op`, when it computes without side effects, up to right after the
/// latest of the ops defining its operands, first doing the same for those
/// (up to `depth` levels) when `op` is their only reader; never above an
/// op with effects (an earlier collective's start keeps the work it
/// overlaps). The sum of a layer's input-gradient contributions, which the
/// update scheduling leaves after the layer's weight update, then comes
/// before it, and so does the collective that reads it.
void hoistPure(Operation *op, int depth) {
  if (!isMemoryEffectFree(op) || op->getNumRegions() != 0)
    return;
  Block *block = op->getBlock();
  Operation *barrier = op->getPrevNode();
  while (barrier && isMemoryEffectFree(barrier))
    barrier = barrier->getPrevNode();
  llvm::SmallPtrSet<Operation *, 4> defs;
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || def->getBlock() != block)
      continue;
    if (depth > 0 && def->hasOneUse())
      hoistPure(def, depth - 1);
    defs.insert(def);
  }
  // The latest defining op after the barrier (hoisting one moves it up,
  // never above the barrier), else the barrier. Found by walking back
  // rather than by block order, which every move invalidates.
  Operation *latest = barrier;
  for (Operation *it = op->getPrevNode(); it && it != barrier;
       it = it->getPrevNode())
    if (defs.contains(it)) {
      latest = it;
      break;
    }
  // With neither (only arguments), it stays where it is.
  if (latest && latest->getNextNode() != op)
    op->moveAfter(latest);
}

struct MegAsyncCollectivesPass
    : public mlir::meg::impl::MegAsyncCollectivesBase<MegAsyncCollectivesPass> {
  using MegAsyncCollectivesBase::MegAsyncCollectivesBase;

  void runOnOperation() override {
    pipelined = getOperation()->hasAttr(MegDialect::kPipelineRankAttrName);
    if (earlyTransfers && pipelined)
      startTransfersEarly(getOperation().getBody().front());
    SmallVector<CollectiveOpInterface> collectives;
    getOperation().walk([&](Operation *op) {
      if (isa<AllGatherOp>(op) && reachesParamStore(op->getResult(0)))
        return;
      if (auto collective = dyn_cast<CollectiveOpInterface>(op);
          collective && collective.hasStartedForm())
        collectives.push_back(collective);
    });
    for (CollectiveOpInterface collective : collectives)
      split(collective);
  }

  /// In a pipeline rank's program, each batch of transfers that sends (a
  /// run of meg.send_start and meg.recv_start between two passes) starts as
  /// soon as the values it sends exist: the ops before it that the sent
  /// values do not need (a backward pass's weight gradients, the last
  /// stage's updates and their stores) move after it, in their order, so
  /// that the neighbour waiting for the transfer waits for no more than it
  /// needs. Only ops of the pass that computes the sent values move, and
  /// only ops that compute, read or store parameters, back to the nearest
  /// other (a wait, a transfer, a collective), so the transfers keep their
  /// order on every rank.
  void startTransfersEarly(Block &block) {
    SmallVector<SmallVector<Operation *>> runs;
    for (Operation &op : block) {
      if (!isa<SendStartOp, RecvStartOp>(op))
        continue;
      Operation *prev = op.getPrevNode();
      if (prev && isa<SendStartOp, RecvStartOp>(prev))
        runs.back().push_back(&op);
      else
        runs.push_back({&op});
    }
    for (SmallVector<Operation *> &run : runs) {
      if (llvm::none_of(run,
                        [](Operation *op) { return isa<SendStartOp>(op); }))
        continue;
      // The pass that computes the sent values (one pass's sends make a
      // batch), back to its first op or a wait, transfer or collective.
      Attribute pass;
      for (Operation *op : run)
        if (auto send = dyn_cast<SendStartOp>(op))
          if (Operation *def = send->getOperand(0).getDefiningOp())
            pass = def->getAttr(MegDialect::kPipelinePassAttrName);
      if (!pass)
        continue;
      SmallVector<Operation *> region;
      for (Operation *it = run.front()->getPrevNode(); it;
           it = it->getPrevNode()) {
        Attribute other = it->getAttr(MegDialect::kPipelinePassAttrName);
        if ((other && other != pass) ||
            (!isMemoryEffectFree(it) && !isa<ParamStoreOp, ParamRefOp>(it)))
          break;
        region.push_back(it);
      }
      std::reverse(region.begin(), region.end());
      llvm::DenseSet<Operation *> inRegion(region.begin(), region.end());
      // What the sent values need: the region's ops that define the
      // operands of the transfers, and of the ops nested in those (a
      // fusion's body), transitively.
      llvm::DenseSet<Operation *> needed;
      SmallVector<Operation *> worklist;
      auto pushInputs = [&](Operation *op) {
        op->walk([&](Operation *nested) {
          for (Value operand : nested->getOperands())
            if (Operation *def = operand.getDefiningOp();
                def && inRegion.contains(def))
              worklist.push_back(def);
        });
      };
      for (Operation *op : run)
        pushInputs(op);
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        if (needed.insert(op).second)
          pushInputs(op);
      }
      SmallVector<Operation *> rest;
      // A store that moves must not pass a read of its parameter that stays.
      llvm::StringSet<> stored;
      bool blocked = false;
      for (Operation *op : region) {
        if (!needed.contains(op)) {
          rest.push_back(op);
          if (auto store = dyn_cast<ParamStoreOp>(op))
            stored.insert(store.getName());
        } else if (auto ref = dyn_cast<ParamRefOp>(op)) {
          blocked |= stored.contains(ref.getName());
        }
      }
      if (rest.empty() || blocked)
        continue;
      Operation *at = run.back();
      for (Operation *op : rest) {
        op->moveAfter(at);
        at = op;
      }
      ++transfersHoisted;
    }
  }

  /// Whether the function is a pipeline rank's program.
  bool pipelined = false;

  void split(CollectiveOpInterface collective) {
    Operation *op = collective;
    Block *block = op->getBlock();
    // The first op of the block that reads the result (found by walking
    // forward: the moves below invalidate the block's order).
    llvm::SmallPtrSet<Operation *, 4> readers;
    for (Operation *user : op->getResult(0).getUsers())
      if (Operation *top = block->findAncestorOpInBlock(*user))
        readers.insert(top);
    Operation *reader = block->getTerminator();
    for (Operation *it = op->getNextNode(); it; it = it->getNextNode())
      if (readers.contains(it)) {
        reader = it;
        break;
      }
    // As early as the input exists, but after every op that writes (other
    // collectives, waits, parameter stores), so that the collectives keep
    // their order on every rank. In a pipeline rank's program, waits and
    // parameter stores do not hold it back (they neither communicate nor
    // write the input): the sums of the loss and the non-finite count,
    // after the passes, then start at the rank's last transfer, so that a
    // stage whose update waits for them does not wait for the other
    // stages' weight-gradient passes and updates. The input itself, when
    // only the collective reads it, comes as early as its own inputs allow.
    if (Operation *input = op->getOperand(0).getDefiningOp();
        input && input->getBlock() == block && input->hasOneUse())
      hoistPure(input, /*depth=*/3);
    Operation *after = op->getPrevNode();
    Operation *def = op->getOperand(0).getDefiningOp();
    while (after && after != def &&
           (isMemoryEffectFree(after) ||
            (pipelined && isa<WaitOp, ParamStoreOp>(after))))
      after = after->getPrevNode();
    // Nothing would run between the start and the wait: stay blocking.
    Operation *first = after ? after->getNextNode() : &block->front();
    bool overlaps = false;
    for (Operation *it = first; it != reader && !overlaps;
         it = it->getNextNode())
      overlaps = it != op;
    if (!overlaps)
      return;
    OpBuilder builder(op);
    if (after)
      builder.setInsertionPointAfter(after);
    else
      builder.setInsertionPointToStart(block);
    Value future = collective.buildStart(builder);
    builder.setInsertionPoint(reader);
    Value result = WaitOp::create(builder, op->getLoc(), future);
    ++overlapped;
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  }
};

} // namespace
