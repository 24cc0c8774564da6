//===- CudaLaunchTable.cpp - host functions read into launch tables ----===//
//
// After outlining, a kernel function is a sequence of gpu.launch_func ops on
// its arguments, its temporaries and views of either. The runtime replays
// that sequence from the artifact, so each launch is recorded with constant
// sizes and its arguments as device pointers: bare-pointer kernels apply a
// view's static offset themselves and take the pointer of the buffer the
// view starts from.
//
//===----------------------------------------------------------------------===//

#include "CudaLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace megc {

namespace {

/// Temporaries start at multiples of this many bytes (what cudaMalloc
/// guarantees for the buffers the kernels were written against).
constexpr uint64_t kScratchAlignment = 256;

class LaunchTableReader {
public:
  LaunchTableReader(func::FuncOp func, KernelDesc &kernel)
      : func(func), kernel(kernel) {}

  LogicalResult read() {
    for (Operation &op : func.getBody().front()) {
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        if (failed(allocate(alloc)))
          return failure();
      } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        if (failed(record(launch)))
          return failure();
      } else if (!isa<memref::DeallocOp, memref::GetGlobalOp,
                      ViewLikeOpInterface, func::ReturnOp>(op) &&
                 !op.hasTrait<OpTrait::ConstantLike>()) {
        return error(op) << "'" << op.getName()
                         << "' would run on the host, which cannot reach "
                            "device memory";
      }
    }
    kernel.cudaScratchBytes = scratchBytes;
    return success();
  }

private:
  InFlightDiagnostic error(Operation &op) {
    return op.emitError() << "kernel '" << kernel.name << "' on CUDA: ";
  }

  LogicalResult allocate(memref::AllocOp alloc) {
    MemRefType type = alloc.getType();
    if (!type.hasStaticShape() || !type.getLayout().isIdentity())
      return error(*alloc) << "temporary of type " << type
                           << " needs a static shape and identity layout";
    unsigned bits = type.getElementType().isIndex()
                        ? 64
                        : type.getElementTypeBitWidth();
    uint64_t bytes = type.getNumElements() * llvm::divideCeil(bits, 8);
    uint64_t offset = llvm::alignTo(scratchBytes, kScratchAlignment);
    scratchOffsets[alloc.getResult()] = offset;
    scratchBytes = offset + bytes;
    return success();
  }

  FailureOr<uint32_t> constantSize(gpu::LaunchFuncOp launch, Value value,
                                   const char *what) {
    std::optional<int64_t> size = getConstantIntValue(value);
    if (!size || *size < 1 || *size > UINT32_MAX)
      return error(*launch) << what << " size is not a positive constant";
    return static_cast<uint32_t>(*size);
  }

  LogicalResult record(gpu::LaunchFuncOp launch) {
    CudaLaunchDesc desc;
    desc.entry = launch.getKernelModuleName().str();
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    Value sizes[2][3] = {{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}};
    for (int dim = 0; dim < 3; ++dim) {
      FailureOr<uint32_t> g = constantSize(launch, sizes[0][dim], "grid");
      FailureOr<uint32_t> b = constantSize(launch, sizes[1][dim], "block");
      if (failed(g) || failed(b))
        return failure();
      desc.grid[dim] = *g;
      desc.block[dim] = *b;
    }
    if (Value shared = launch.getDynamicSharedMemorySize()) {
      FailureOr<uint32_t> bytes = constantSize(launch, shared, "shared memory");
      if (failed(bytes))
        return failure();
      desc.sharedBytes = *bytes;
    }
    for (Value operand : launch.getKernelOperands()) {
      FailureOr<CudaArgDesc> arg = resolve(launch, operand);
      if (failed(arg))
        return failure();
      desc.args.push_back(*arg);
    }
    kernel.cudaLaunches.push_back(std::move(desc));
    return success();
  }

  /// The buffer `value` is a view of: a function argument or a temporary.
  FailureOr<CudaArgDesc> resolve(gpu::LaunchFuncOp launch, Value value) {
    if (!isa<MemRefType>(value.getType()))
      return error(*launch) << "launch operand of type " << value.getType()
                            << " is not a buffer";
    while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
      value = view.getViewSource();
    if (auto arg = dyn_cast<BlockArgument>(value))
      if (arg.getOwner() == &func.getBody().front())
        return CudaArgDesc{false, arg.getArgNumber()};
    auto found = scratchOffsets.find(value);
    if (found != scratchOffsets.end())
      return CudaArgDesc{true, found->second};
    return error(*launch) << "launch operand is neither a kernel argument nor "
                             "a temporary";
  }

  func::FuncOp func;
  KernelDesc &kernel;
  llvm::DenseMap<Value, uint64_t> scratchOffsets;
  uint64_t scratchBytes = 0;
};

} // namespace

LogicalResult readLaunchTable(ModuleOp kernels, ProgramDesc &program) {
  llvm::StringMap<KernelDesc *> byName;
  for (KernelDesc &kernel : program.kernels)
    byName[kernel.name] = &kernel;
  for (auto func : kernels.getOps<func::FuncOp>()) {
    KernelDesc *kernel = byName.lookup(func.getName());
    if (!kernel)
      return func.emitError() << "internal error: no kernel named "
                              << func.getName();
    kernel->cudaLaunches.clear();
    if (failed(LaunchTableReader(func, *kernel).read()))
      return failure();
    if (kernel->cudaLaunches.empty())
      return func.emitError() << "kernel '" << kernel->name
                              << "' on CUDA: no launch was generated";
  }
  return success();
}

} // namespace megc
