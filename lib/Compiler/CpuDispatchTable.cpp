//===- CpuDispatchTable.cpp - CPU kernel functions read into tables ----===//
//
// After meg-outline-cpu-dispatches a kernel function holds its temporaries
// and one scf.forall per dispatch (or, for one workgroup, a plain call),
// each calling its dispatch function with kernel arguments and
// temporaries, the workgroup id last. The strategy
// attribute and the layout of the temporaries in scratch are read here too,
// and shared with the CUDA reader.
//
//===----------------------------------------------------------------------===//

#include "KernelTables.h"

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace megc {

namespace {

/// Temporaries start at multiples of this many bytes, as memref.alloc
/// aligned them (a cache line; vector loads of any width stay aligned).
constexpr uint64_t kScratchAlignment = 64;

} // namespace

KernelStrategyDesc strategyOf(func::FuncOp kernel) {
  KernelStrategyDesc desc;
  auto strategy = kernel->getAttrOfType<meg::KernelStrategyAttr>(
      meg::MegDialect::kKernelStrategyAttrName);
  if (!strategy)
    return desc;
  desc.kind = meg::stringifyKernelStrategyKind(strategy.getKind()).str();
  desc.domain.assign(strategy.getDomain().begin(), strategy.getDomain().end());
  desc.tile.assign(strategy.getTile().begin(), strategy.getTile().end());
  desc.vectorWidth = static_cast<uint32_t>(strategy.getVector());
  return desc;
}

LogicalResult ScratchLayout::place(memref::AllocOp alloc) {
  MemRefType type = alloc.getType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity())
    return failure();
  unsigned bits =
      type.getElementType().isIndex() ? 64 : type.getElementTypeBitWidth();
  uint64_t bytes = type.getNumElements() * llvm::divideCeil(bits, 8);
  uint64_t offset = llvm::alignTo(total, alignment);
  offsets[alloc.getResult()] = offset;
  total = offset + bytes;
  return success();
}

std::optional<uint64_t> ScratchLayout::offsetOf(Value value) const {
  auto found = offsets.find(value);
  if (found == offsets.end())
    return std::nullopt;
  return found->second;
}

FailureOr<std::vector<KernelCodeDesc>>
readCpuDispatchTables(ModuleOp kernels, const ProgramDesc &program) {
  std::vector<KernelCodeDesc> codes;
  for (const KernelDesc &kernel : program.kernels) {
    auto func = kernels.lookupSymbol<func::FuncOp>(kernel.name);
    if (!func)
      return kernels.emitError() << "internal error: kernel '" << kernel.name
                                 << "' is missing after outlining";
    KernelCodeDesc code;
    code.strategy = strategyOf(func);
    ScratchLayout scratch(kScratchAlignment);
    for (Operation &op : func.getBody().front()) {
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        if (failed(scratch.place(alloc)))
          return alloc.emitError()
                 << "kernel '" << kernel.name << "': temporary of type "
                 << alloc.getType()
                 << " needs a static shape and identity layout";
        continue;
      }
      // A dispatch: a forall over its workgroups calling its function, or
      // (folded from a forall of one workgroup) the call alone.
      auto forall = dyn_cast<scf::ForallOp>(op);
      auto call = forall ? dyn_cast<func::CallOp>(&forall.getBody()->front())
                         : dyn_cast<func::CallOp>(op);
      if (!forall && !call)
        continue;
      static constexpr int64_t kOneWorkgroup[] = {1};
      ArrayRef<int64_t> grid =
          forall ? forall.getStaticUpperBound() : ArrayRef(kOneWorkgroup);
      if (!call || grid.size() != 1 || ShapedType::isDynamic(grid.front()))
        return op.emitError()
               << "internal error: kernel '" << kernel.name
               << "': a dispatch is not a one-dimensional forall calling its "
                  "function";
      DispatchDesc dispatch;
      dispatch.entry = (call.getCallee() + "_entry").str();
      dispatch.grid = {static_cast<uint32_t>(grid.front()), 1, 1};
      for (Value operand : call.getOperands().drop_back()) {
        if (auto arg = dyn_cast<BlockArgument>(operand);
            arg && arg.getOwner() == &func.getBody().front()) {
          dispatch.args.push_back({false, arg.getArgNumber()});
        } else if (std::optional<uint64_t> offset = scratch.offsetOf(operand)) {
          dispatch.args.push_back({true, *offset});
        } else {
          return call.emitError()
                 << "internal error: kernel '" << kernel.name
                 << "': a dispatch argument is neither a kernel argument nor "
                    "a temporary";
        }
      }
      code.dispatches.push_back(std::move(dispatch));
    }
    code.scratchBytes = scratch.bytes();
    codes.push_back(std::move(code));
  }
  return codes;
}

} // namespace megc
