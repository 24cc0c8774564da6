//===- GpuToHostEmulation.cpp - GPU kernels as host code for the emulator -===//
//
// meg-gpu-to-host-emulation. The outlined kernels, as the NVVM lowering
// receives them, become host functions that the GPU emulator (runtime/
// emulator) runs once per thread: every id, barrier and shuffle a call to
// the emulator, every memory access announced to it (address, bytes,
// alignment, buffer, whether its indices are inside its view) before it
// happens, workgroup buffers arguments that the emulator passes per block.
// The interface is runtime/emulator/include/megemu/Abi.h.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "megemu/Abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace megc {
#define GEN_PASS_DEF_MEGGPUTOHOSTEMULATION
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;
using namespace megemu;

namespace megc {
namespace {

/// A memref type without its GPU address space (the host has one).
Type hostType(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref ||
      !isa_and_nonnull<gpu::AddressSpaceAttr>(memref.getMemorySpace()))
    return type;
  return MemRefType::get(memref.getShape(), memref.getElementType(),
                         memref.getLayout());
}

uint64_t elementBytes(MemRefType type) {
  return std::max<uint64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// Bytes from a bare pointer to `type`'s buffer that its view spans: the
/// last element's offset plus one, times the element; -1 when not static.
int64_t extentOf(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!type.hasStaticShape() ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return -1;
  if (type.getNumElements() == 0)
    return 0;
  int64_t last = offset;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides))
    last += (size - 1) * stride;
  return (last + 1) * static_cast<int64_t>(elementBytes(type));
}

class KernelRewriter {
public:
  KernelRewriter(ModuleOp module, SmallVectorImpl<Attribute> &sites)
      : module(module), sites(sites), b(module.getContext()) {}

  /// Replaces `kernel` by a func.func at the module's top level.
  LogicalResult convert(gpu::GPUFuncOp kernel) {
    MLIRContext *context = module.getContext();
    unsigned args = kernel.getNumArguments();
    SmallVector<Type> inputs(kernel.getArgumentTypes());
    SmallVector<Attribute> extents, workgroup;
    for (Type type : inputs)
      extents.push_back(b.getI64IntegerAttr(
          isa<MemRefType>(type) ? extentOf(cast<MemRefType>(type)) : -1));
    for (BlockArgument buffer : kernel.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(buffer.getType());
      uint64_t align = elementBytes(type);
      if (auto attr = kernel.getWorkgroupAttributionAttr(
              buffer.getArgNumber() - args,
              LLVM::LLVMDialect::getAlignAttrName()))
        align = std::max<uint64_t>(align, cast<IntegerAttr>(attr).getInt());
      int64_t bytes = extentOf(type);
      if (bytes < 0)
        return kernel.emitError()
               << "emulation: workgroup buffer " << buffer.getType()
               << " has no static size";
      workgroup.push_back(b.getI64ArrayAttr(
          {bytes, static_cast<int64_t>(align)}));
      inputs.push_back(hostType(type));
    }
    for (Type type : inputs)
      if (!isa<MemRefType>(type))
        return kernel.emitError() << "emulation: argument of type " << type
                                  << " (only buffers are passed)";

    b.setInsertionPoint(kernel->getParentOfType<gpu::GPUModuleOp>());
    auto func = func::FuncOp::create(b, kernel.getLoc(), kernel.getName(),
                                     b.getFunctionType(inputs, {}));
    func->setAttr("megemu.args", b.getI64IntegerAttr(args));
    func->setAttr("megemu.extents", b.getArrayAttr(extents));
    func->setAttr("megemu.workgroup", b.getArrayAttr(workgroup));
    func.getBody().takeBody(kernel.getBody());
    Block &entry = func.front();
    name = kernel.getName().str();

    // Private buffers: one per thread, on its stack.
    unsigned firstPrivate = args + kernel.getNumWorkgroupAttributions();
    b.setInsertionPointToStart(&entry);
    while (entry.getNumArguments() > firstPrivate) {
      BlockArgument arg = entry.getArgument(firstPrivate);
      auto alloca = memref::AllocaOp::create(
          b, arg.getLoc(), cast<MemRefType>(hostType(arg.getType())));
      arg.replaceAllUsesWith(alloca.getResult());
      entry.eraseArgument(firstPrivate);
    }
    func.walk([&](Operation *op) {
      for (Value result : op->getResults())
        result.setType(hostType(result.getType()));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(hostType(arg.getType()));
    });
    (void)context;

    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops)
      if (failed(rewrite(op, func)))
        return failure();
    return success();
  }

private:
  int32_t site(Operation *op) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << op->getName() << " at " << op->getLoc();
    sites.push_back(b.getStringAttr(text));
    return static_cast<int32_t>(sites.size() - 1);
  }

  Value i32(Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 32);
  }
  Value i64(Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 64);
  }
  Value index(Location loc, int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  /// The hook `hook` (declared on first use).
  func::FuncOp hook(Hook which) {
    StringRef hookName = kHookNames[which];
    if (auto existing = module.lookupSymbol<func::FuncOp>(hookName))
      return existing;
    MLIRContext *context = module.getContext();
    Type i32 = IntegerType::get(context, 32), i64 = IntegerType::get(context, 64),
         idx = IndexType::get(context);
    FunctionType type;
    switch (which) {
    case kHookId:
      type = FunctionType::get(context, {i32}, {idx});
      break;
    case kHookBarrier:
      type = FunctionType::get(context, {i32}, {});
      break;
    case kHookShuffle:
      type = FunctionType::get(context, {i64, i32, i32, i32, i32}, {i64});
      break;
    case kHookShuffleValid:
      type = FunctionType::get(context, {}, {i32});
      break;
    default:
      type = FunctionType::get(context, {idx, i64, i32, i32, i32, i32}, {});
      break;
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(b, module.getLoc(), hookName, type);
    decl.setPrivate();
    return decl;
  }

  Value id(Location loc, int32_t which) {
    return func::CallOp::create(b, loc, hook(kHookId), ValueRange{i32(loc, which)})
        .getResult(0);
  }

  /// The buffer `memref` is a view of: an argument's index, a constant or
  /// a private buffer; nullopt when it cannot be traced.
  std::optional<int32_t> bufferOf(Value memref, func::FuncOp func) {
    while (true) {
      if (auto arg = dyn_cast<BlockArgument>(memref)) {
        if (arg.getOwner() == &func.front())
          return static_cast<int32_t>(arg.getArgNumber());
        return std::nullopt;
      }
      Operation *def = memref.getDefiningOp();
      if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
        memref = view.getViewSource();
        continue;
      }
      if (isa<memref::GetGlobalOp>(def))
        return kConstantBuffer;
      if (isa<memref::AllocaOp>(def))
        return kPrivateBuffer;
      return std::nullopt;
    }
  }

  /// Announces an access of `lanes` elements along the last dimension of
  /// `memref` at `indices`.
  LogicalResult announce(Operation *op, Value memref, ValueRange indices,
                         int64_t lanes, int32_t kind, func::FuncOp func) {
    Location loc = op->getLoc();
    auto type = cast<MemRefType>(memref.getType());
    std::optional<int32_t> buffer = bufferOf(memref, func);
    if (!buffer)
      return op->emitError() << "emulation: kernel '" << name
                             << "' accesses a buffer that cannot be traced "
                                "to an argument, a workgroup buffer or a "
                                "constant";
    b.setInsertionPoint(op);
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value pointer =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
    Value linear = metadata.getOffset();
    Value inView = arith::ConstantIntOp::create(b, loc, 1, 1);
    unsigned rank = type.getRank();
    for (unsigned dim = 0; dim < rank; ++dim) {
      Value at = indices[dim];
      linear = arith::AddIOp::create(
          b, loc, linear,
          arith::MulIOp::create(b, loc, at, metadata.getStrides()[dim]));
      Value end = at;
      if (dim + 1 == rank && lanes > 1)
        end = arith::AddIOp::create(b, loc, at, index(loc, lanes - 1));
      inView = arith::AndIOp::create(
          b, loc, inView,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, end,
                                metadata.getSizes()[dim]));
    }
    uint64_t bytes = elementBytes(type) * static_cast<uint64_t>(lanes);
    Value address = arith::AddIOp::create(
        b, loc, pointer,
        arith::MulIOp::create(b, loc, linear,
                              index(loc, elementBytes(type))));
    // The hardware requires an access's own size as alignment (a vector's
    // whole size; rounded down to a power of two).
    uint64_t align = uint64_t(1) << llvm::Log2_64(bytes);
    int32_t flags = kind | (llvm::Log2_64(align) << kAlignShift);
    func::CallOp::create(
        b, loc, hook(kHookAccess),
        ValueRange{address, i64(loc, static_cast<int64_t>(bytes)),
                   i32(loc, flags), i32(loc, *buffer), i32(loc, site(op)),
                   arith::ExtUIOp::create(b, loc, b.getI32Type(), inView)});
    return success();
  }

  LogicalResult rewrite(Operation *op, func::FuncOp func) {
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    auto replaceId = [&](int32_t base, gpu::Dimension dim) {
      Value value = id(loc, base + static_cast<int32_t>(dim));
      op->getResult(0).replaceAllUsesWith(value);
      op->erase();
      return success();
    };
    if (auto t = dyn_cast<gpu::ThreadIdOp>(op))
      return replaceId(kThreadId, t.getDimension());
    if (auto t = dyn_cast<gpu::BlockIdOp>(op))
      return replaceId(kBlockId, t.getDimension());
    if (auto t = dyn_cast<gpu::BlockDimOp>(op))
      return replaceId(kBlockDim, t.getDimension());
    if (auto t = dyn_cast<gpu::GridDimOp>(op))
      return replaceId(kGridDim, t.getDimension());
    if (isa<gpu::LaneIdOp>(op)) {
      op->getResult(0).replaceAllUsesWith(id(loc, kLaneId));
      op->erase();
      return success();
    }
    if (isa<gpu::BarrierOp>(op)) {
      func::CallOp::create(b, loc, hook(kHookBarrier),
                           ValueRange{i32(loc, site(op))});
      op->erase();
      return success();
    }
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op))
      return rewriteShuffle(shuffle);
    if (auto ret = dyn_cast<gpu::ReturnOp>(op)) {
      func::ReturnOp::create(b, loc);
      op->erase();
      return success();
    }
    if (auto load = dyn_cast<memref::LoadOp>(op))
      return announce(op, load.getMemRef(), load.getIndices(), 1, kRead, func);
    if (auto store = dyn_cast<memref::StoreOp>(op))
      return announce(op, store.getMemRef(), store.getIndices(), 1, kWrite,
                      func);
    if (auto load = dyn_cast<vector::LoadOp>(op))
      return announceVector(op, load.getBase(), load.getIndices(),
                            load.getVectorType(), kRead, func);
    if (auto store = dyn_cast<vector::StoreOp>(op))
      return announceVector(op, store.getBase(), store.getIndices(),
                            store.getVectorType(), kWrite, func);
    if (auto rmw = dyn_cast<memref::AtomicRMWOp>(op))
      return announce(op, rmw.getMemref(), rmw.getIndices(), 1,
                      kRead | kWrite | kAtomic, func);
    if (auto rmw = dyn_cast<memref::GenericAtomicRMWOp>(op))
      return announce(op, rmw.getMemref(), rmw.getIndices(), 1,
                      kRead | kWrite | kAtomic, func);
    if (isa<vector::TransferReadOp, vector::TransferWriteOp,
            vector::MaskedLoadOp, vector::MaskedStoreOp, vector::GatherOp,
            vector::ScatterOp, memref::CopyOp, memref::AllocOp,
            memref::DeallocOp>(op) ||
        op->getDialect() == b.getContext()->getLoadedDialect("gpu"))
      return op->emitError() << "emulation: kernel '" << name << "' has '"
                             << op->getName()
                             << "', which the GPU emulator does not run";
    return success();
  }

  LogicalResult announceVector(Operation *op, Value base, ValueRange indices,
                               VectorType type, int32_t kind,
                               func::FuncOp func) {
    if (type.getRank() != 1)
      return op->emitError() << "emulation: kernel '" << name
                             << "' accesses a vector of rank "
                             << type.getRank() << " (only 1-D vectors)";
    return announce(op, base, indices, type.getNumElements(), kind, func);
  }

  LogicalResult rewriteShuffle(gpu::ShuffleOp shuffle) {
    Location loc = shuffle.getLoc();
    Type type = shuffle.getValue().getType();
    unsigned width = type.getIntOrFloatBitWidth();
    if (width != 32 && width != 64)
      return shuffle.emitError() << "emulation: shuffle of " << type;
    Type bitsType = b.getIntegerType(width);
    Value bits = shuffle.getValue();
    if (isa<FloatType>(type))
      bits = arith::BitcastOp::create(b, loc, bitsType, bits);
    if (width == 32)
      bits = arith::ExtUIOp::create(b, loc, b.getI64Type(), bits);
    int32_t mode = 0;
    switch (shuffle.getMode()) {
    case gpu::ShuffleMode::XOR:
      mode = kShuffleXor;
      break;
    case gpu::ShuffleMode::UP:
      mode = kShuffleUp;
      break;
    case gpu::ShuffleMode::DOWN:
      mode = kShuffleDown;
      break;
    case gpu::ShuffleMode::IDX:
      mode = kShuffleIdx;
      break;
    }
    Value result =
        func::CallOp::create(
            b, loc, hook(kHookShuffle),
            ValueRange{bits, shuffle.getOffset(), shuffle.getWidth(),
                       i32(loc, mode), i32(loc, site(shuffle))})
            .getResult(0);
    if (width == 32)
      result = arith::TruncIOp::create(b, loc, b.getI32Type(), result);
    if (isa<FloatType>(type))
      result = arith::BitcastOp::create(b, loc, type, result);
    Value valid = func::CallOp::create(b, loc, hook(kHookShuffleValid),
                                       ValueRange{})
                      .getResult(0);
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, valid,
                                  i32(loc, 0));
    shuffle.getShuffleResult().replaceAllUsesWith(result);
    shuffle.getValid().replaceAllUsesWith(valid);
    shuffle.erase();
    return success();
  }

  ModuleOp module;
  SmallVectorImpl<Attribute> &sites;
  OpBuilder b;
  std::string name;
};

struct MegGpuToHostEmulationPass
    : public impl::MegGpuToHostEmulationBase<MegGpuToHostEmulationPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Attribute> sites;
    if (auto existing = module->getAttrOfType<ArrayAttr>("megemu.sites"))
      sites.append(existing.begin(), existing.end());
    KernelRewriter rewriter(module, sites);
    for (auto gpuModule :
         llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>())) {
      for (Operation &op :
           llvm::make_early_inc_range(gpuModule.getBodyRegion().front())) {
        if (auto kernel = dyn_cast<gpu::GPUFuncOp>(op)) {
          if (failed(rewriter.convert(kernel)))
            return signalPassFailure();
          kernel.erase();
        } else if (auto global = dyn_cast<memref::GlobalOp>(op)) {
          if (!module.lookupSymbol(global.getSymName()))
            global->moveBefore(gpuModule);
        } else {
          op.emitError() << "emulation: '" << op.getName()
                         << "' in a GPU module";
          return signalPassFailure();
        }
      }
      gpuModule.erase();
    }
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
    module->setAttr("megemu.sites", ArrayAttr::get(&getContext(), sites));
  }
};

} // namespace
} // namespace megc
