//===- AsyncAllToAll.cpp - the meg-async-all-to-all pass ---------------===//
//
// Splits each blocking all-to-all into a start right after its input and a
// wait right before its first reader, so that the work in between overlaps
// the exchange.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGASYNCALLTOALL
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

struct MegAsyncAllToAllPass
    : public mlir::meg::impl::MegAsyncAllToAllBase<MegAsyncAllToAllPass> {
  using MegAsyncAllToAllBase::MegAsyncAllToAllBase;

  void runOnOperation() override {
    SmallVector<AllToAllOp> exchanges;
    getOperation().walk([&](AllToAllOp op) { exchanges.push_back(op); });
    for (AllToAllOp op : exchanges)
      split(op);
  }

  void split(AllToAllOp op) {
    Block *block = op->getBlock();
    // The first op of the block that reads the result.
    Operation *reader = nullptr;
    for (Operation *user : op.getResult().getUsers()) {
      Operation *top = block->findAncestorOpInBlock(*user);
      if (top && (!reader || top->isBeforeInBlock(reader)))
        reader = top;
    }
    OpBuilder builder(op);
    // As early as the input exists, but after every op that writes (other
    // collectives, waits, parameter stores), so that the exchanges keep
    // their order.
    Operation *after = op->getPrevNode();
    Operation *def = op.getInput().getDefiningOp();
    while (after && after != def && isMemoryEffectFree(after))
      after = after->getPrevNode();
    if (after)
      builder.setInsertionPointAfter(after);
    else
      builder.setInsertionPointToStart(block);
    auto type = cast<RankedTensorType>(op.getType());
    Value future = AllToAllStartOp::create(
        builder, op.getLoc(), FutureType::get(op.getContext(), type),
        op.getInput(), op.getMeshAttr(), op.getAxesAttr());
    builder.setInsertionPoint(reader ? reader : block->getTerminator());
    Value result = WaitOp::create(builder, op.getLoc(), future);
    if (future.getDefiningOp()->getNextNode() != result.getDefiningOp())
      ++overlapped;
    op.getResult().replaceAllUsesWith(result);
    op.erase();
  }
};

} // namespace
