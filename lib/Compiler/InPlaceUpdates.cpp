//===- InPlaceUpdates.cpp - where results are computed ---===//
//
// The buffer each result is computed into: an output the entry returns, or
// the parameter an update stores it to when nothing reads the old value
// later (an optimizer step in place), else a new buffer.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

namespace megc {

/// The ancestor of `op` in `block`, or null.
static Operation *inBlock(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

uint32_t ProgramBuilder::resultBuffer(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  // A value the entry returns is computed into (the first of) its outputs,
  // which the ops that also read it read from there: nothing else writes
  // an output.
  std::optional<unsigned> output;
  for (OpOperand &use : result.getUses())
    if (auto ret = dyn_cast<func::ReturnOp>(use.getOwner());
        ret && ret->getBlock() == result.getParentBlock() &&
        (!output || use.getOperandNumber() < *output))
      output = use.getOperandNumber();
  if (output)
    return addBuffer(BufferKind::Output, *output, type);
  return addBuffer(BufferKind::Arena, 0, type);
}

bool ProgramBuilder::readAfter(StringRef param, Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  Block *top = &func.getBody().front();
  Operation *opTop = inBlock(top, op);
  // Whether `user` may run after `op` (ops of one block in order, graph
  // regions as a whole).
  auto runsAfter = [&](Operation *user) {
    if (user->getBlock() == op->getBlock())
      return user != op && !user->isBeforeInBlock(op);
    Operation *userTop = inBlock(top, user);
    return !userTop || userTop == opTop || !userTop->isBeforeInBlock(opTop);
  };
  bool after = false;
  // Every use of every read of the parameter, through views, graph region
  // arguments, and the waits of collectives that read it, must come before
  // `op`.
  std::function<void(Value)> visit = [&](Value value) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto region = dyn_cast<GraphRegionOp>(user)) {
        visit(region.getBody().front().getArgument(
            use.getOperandNumber() -
            region.getInputs().getBeginOperandIndex()));
        continue;
      }
      after |= runsAfter(user);
      auto collective = dyn_cast<CollectiveOpInterface>(user);
      if (isa<ReshapeOp>(user) || (collective && collective.isStarted()))
        visit(user->getResult(0));
    }
  };
  func.walk([&](ParamRefOp ref) {
    if (ref.getName() == param)
      visit(ref.getResult());
  });
  return after;
}

std::optional<uint32_t> ProgramBuilder::storedParameter(Operation *op,
                                                        Value result) {
  // The result may have other readers (the cast of an updated master
  // weight to the model's dtype): they read the parameter's storage, which
  // holds the new value from `op` on. Reshapes are views, and a graph
  // region's result is the value its body yields: the value they lead to is
  // the one stored.
  Value stored = result;
  while (stored.hasOneUse()) {
    OpOperand &use = *stored.getUses().begin();
    if (auto reshape = dyn_cast<ReshapeOp>(use.getOwner()))
      stored = reshape.getResult();
    else if (auto region =
                 dyn_cast<GraphRegionOp>(use.getOwner()->getParentOp());
             region && isa<YieldOp>(use.getOwner()))
      stored = region.getResult(use.getOperandNumber());
    else
      break;
  }
  ParamStoreOp store;
  for (Operation *user : stored.getUsers()) {
    auto candidate = dyn_cast<ParamStoreOp>(user);
    if (!candidate)
      continue;
    if (store)
      return std::nullopt;
    store = candidate;
  }
  if (!store || store->getParentOp() != op->getParentOfType<func::FuncOp>() ||
      !paramIndex.count(store.getName()) || readAfter(store.getName(), op))
    return std::nullopt;
  uint32_t param = paramIndex.lookup(store.getName());
  // A kernel that also reads the parameter would overwrite what it reads;
  // only the optimizer's elementwise update may (see placeKernel).
  for (Value operand : op->getOperands())
    if (ParamRefOp ref = paramRefOf(operand))
      if (ref.getName() == store.getName() && !isa<AdamWOp>(op))
        return std::nullopt;
  if (isa<FusionOp>(op)) {
    bool readsIt = false;
    op->walk(
        [&](ParamRefOp ref) { readsIt |= ref.getName() == store.getName(); });
    if (readsIt)
      return std::nullopt;
  }
  return param;
}

} // namespace megc
