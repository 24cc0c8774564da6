//===- Mutations.cpp - bugs planted in the GPU code ---------------------===//

#include "Mutations.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace megc::gpucheck {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

bool inWorkgroupMemory(Value memref) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  auto space = type ? dyn_cast_or_null<gpu::AddressSpaceAttr>(
                          type.getMemorySpace())
                    : nullptr;
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}

/// `indices` with one added to the last.
void shiftLastIndex(Operation *op, OpOperand &last) {
  OpBuilder b(op);
  Value one = arith::ConstantIndexOp::create(b, op->getLoc(), 1);
  last.set(arith::AddIOp::create(b, op->getLoc(), last.get(), one));
}

} // namespace

llvm::Expected<Mutation> parseMutation(llvm::StringRef text) {
  auto [kind, rest] = text.split(':');
  Mutation mutation;
  if (kind == "barrier")
    mutation.kind = Mutation::Kind::Barrier;
  else if (kind == "shared-index")
    mutation.kind = Mutation::Kind::SharedIndex;
  else if (kind == "misalign")
    mutation.kind = Mutation::Kind::Misalign;
  else if (kind == "grid")
    mutation.kind = Mutation::Kind::Grid;
  else
    return error("--mutate '" + text +
                 "': expected barrier:KERNEL[:N], shared-index:KERNEL, "
                 "misalign:KERNEL or grid:KERNEL");
  auto [kernel, index] = rest.split(':');
  mutation.kernel = kernel.str();
  if (mutation.kernel.empty() ||
      (!index.empty() && (mutation.kind != Mutation::Kind::Barrier ||
                          index.getAsInteger(10, mutation.index))))
    return error("--mutate '" + text + "': expected a kernel name" +
                 (mutation.kind == Mutation::Kind::Barrier
                      ? " and an optional barrier number"
                      : ""));
  return mutation;
}

llvm::Error applyMutation(const Mutation &mutation, const ProgramDesc &program,
                          ModuleOp device, std::vector<KernelCodeDesc> &codes) {
  size_t kernel = 0;
  while (kernel < program.kernels.size() &&
         program.kernels[kernel].name != mutation.kernel)
    ++kernel;
  if (kernel == program.kernels.size())
    return error("--mutate: the program has no kernel '" + mutation.kernel +
                 "'");
  KernelCodeDesc &code = codes[kernel];
  if (mutation.kind == Mutation::Kind::Grid) {
    DispatchDesc &first = code.dispatches.front();
    if (first.grid[0] < 2)
      return error("--mutate grid: kernel '" + mutation.kernel +
                   "' launches a single block");
    --first.grid[0];
    return llvm::Error::success();
  }
  // The first op of the kind in the kernel's dispatches, in order.
  unsigned barriers = 0;
  for (const DispatchDesc &dispatch : code.dispatches) {
    gpu::GPUFuncOp func;
    device.walk([&](gpu::GPUFuncOp f) {
      if (f.getName() == dispatch.entry)
        func = f;
    });
    if (!func)
      return error("--mutate: no GPU function '" + dispatch.entry + "'");
    Operation *target = nullptr;
    func.walk([&](Operation *op) {
      if (target)
        return;
      switch (mutation.kind) {
      case Mutation::Kind::Barrier:
        if (isa<gpu::BarrierOp>(op) && barriers++ == mutation.index)
          target = op;
        break;
      case Mutation::Kind::SharedIndex:
        if (auto load = dyn_cast<memref::LoadOp>(op))
          if (inWorkgroupMemory(load.getMemRef()) &&
              !load.getIndices().empty())
            target = op;
        break;
      case Mutation::Kind::Misalign:
        if (isa<vector::LoadOp, vector::StoreOp>(op))
          target = op;
        break;
      case Mutation::Kind::Grid:
        break;
      }
    });
    if (!target)
      continue;
    if (mutation.kind == Mutation::Kind::Barrier) {
      target->erase();
    } else if (auto load = dyn_cast<memref::LoadOp>(target)) {
      shiftLastIndex(target, load.getIndicesMutable()
                                 [load.getIndices().size() - 1]);
    } else if (auto load = dyn_cast<vector::LoadOp>(target)) {
      shiftLastIndex(target,
                     load.getIndicesMutable()[load.getIndices().size() - 1]);
    } else if (auto store = dyn_cast<vector::StoreOp>(target)) {
      shiftLastIndex(target,
                     store.getIndicesMutable()[store.getIndices().size() - 1]);
    }
    return llvm::Error::success();
  }
  static const char *kWhat[] = {"barrier", "read of a workgroup buffer",
                                "vector access", ""};
  return error("--mutate: kernel '" + mutation.kernel + "' has no " +
               kWhat[static_cast<int>(mutation.kind)] +
               (mutation.kind == Mutation::Kind::Barrier
                    ? " number " + std::to_string(mutation.index)
                    : std::string()));
}

} // namespace megc::gpucheck
