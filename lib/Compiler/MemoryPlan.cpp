//===- MemoryPlan.cpp - each entry's memory plan, by megrt-plan-memory ---===//
//
// Writes each entry as the megrt dialect (ProgramToMegrt.cpp: its buffers,
// then its commands with their operands' memory effects), runs
// megrt-plan-memory on it, and reads the arena offsets and the plan's
// figures back into the entry.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"
#include "megc/Dialect/Megrt/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

namespace megc {

mlir::LogicalResult planMemory(ProgramDesc &program) {
  for (EntryDesc &entry : program.entries) {
    if (entry.buffers.empty()) {
      entry.plan = {};
      continue;
    }
    mlir::MLIRContext *context = entry.buffers.front().type.getContext();
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::ModuleOp::create(mlir::UnknownLoc::get(context));
    mlir::FailureOr<MegrtEntry> written =
        writeMegrtEntry(program, entry, *module, "entry");
    if (failed(written))
      return mlir::failure();
    mlir::PassManager pm(context, mlir::ModuleOp::getOperationName());
    pm.addNestedPass<rt::EntryOp>(rt::createMegrtPlanMemory());
    if (failed(pm.run(*module)))
      return mlir::failure();
    auto planned = llvm::cast<rt::EntryOp>(written->op);
    for (auto [buffer, op] : llvm::zip(entry.buffers, written->declarations))
      if (auto arena = llvm::dyn_cast<rt::ArenaOp>(op))
        if (std::optional<uint64_t> offset = arena.getOffset())
          buffer.offset = *offset;
    // Views share their storage's placement.
    for (BufferDesc &buffer : entry.buffers)
      if (buffer.aliasOf >= 0)
        buffer.offset = entry.buffers[buffer.aliasOf].offset;
    MemoryPlan &plan = entry.plan;
    plan = {};
    plan.arenaBytes = planned.getArenaBytes().value_or(0);
    plan.peakBytes = planned.getPeakBytes().value_or(0);
    plan.unplannedBytes = planned.getUnplannedBytes().value_or(0);
    plan.liveAtLossBytes = planned.getLiveAtLossBytes().value_or(0);
  }
  return mlir::success();
}

} // namespace megc
