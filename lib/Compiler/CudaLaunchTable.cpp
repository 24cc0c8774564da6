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

#include "KernelTables.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace megc {

namespace {

/// Temporaries start at multiples of this many bytes (what cudaMalloc
/// guarantees for the buffers the kernels were written against).
constexpr uint64_t kScratchAlignment = 256;

class LaunchTableReader {
public:
  LaunchTableReader(func::FuncOp func, const KernelDesc &kernel)
      : func(func), kernel(kernel), scratch(kScratchAlignment) {}

  FailureOr<KernelCodeDesc> read() {
    KernelCodeDesc code;
    code.strategy = strategyOf(func);
    for (Operation &op : func.getBody().front()) {
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        if (failed(scratch.place(alloc)))
          return error(op) << "temporary of type " << alloc.getType()
                           << " needs a static shape and identity layout";
      } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        FailureOr<DispatchDesc> dispatch = record(launch);
        if (failed(dispatch))
          return failure();
        code.dispatches.push_back(std::move(*dispatch));
      } else if (!isa<memref::GetGlobalOp, ViewLikeOpInterface, func::ReturnOp>(
                     op) &&
                 !op.hasTrait<OpTrait::ConstantLike>()) {
        return error(op) << "'" << op.getName()
                         << "' would run on the host, which cannot reach "
                            "device memory";
      }
    }
    if (code.dispatches.empty())
      return func.emitError() << "kernel '" << kernel.name
                              << "' on CUDA: no launch was generated";
    code.scratchBytes = scratch.bytes();
    return code;
  }

private:
  InFlightDiagnostic error(Operation &op) {
    return op.emitError() << "kernel '" << kernel.name << "' on CUDA: ";
  }

  FailureOr<uint32_t> constantSize(gpu::LaunchFuncOp launch, Value value,
                                   const char *what) {
    std::optional<int64_t> size = getConstantIntValue(value);
    if (!size || *size < 1 || *size > UINT32_MAX)
      return error(*launch) << what << " size is not a positive constant";
    return static_cast<uint32_t>(*size);
  }

  FailureOr<DispatchDesc> record(gpu::LaunchFuncOp launch) {
    DispatchDesc desc;
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
      FailureOr<DispatchArgDesc> arg = resolve(launch, operand);
      if (failed(arg))
        return failure();
      desc.args.push_back(*arg);
    }
    return desc;
  }

  /// The buffer `value` is a view of: a function argument or a temporary.
  FailureOr<DispatchArgDesc> resolve(gpu::LaunchFuncOp launch, Value value) {
    if (!isa<MemRefType>(value.getType()))
      return error(*launch) << "launch operand of type " << value.getType()
                            << " is not a buffer";
    while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
      value = view.getViewSource();
    if (auto arg = dyn_cast<BlockArgument>(value))
      if (arg.getOwner() == &func.getBody().front())
        return DispatchArgDesc{false, arg.getArgNumber()};
    if (std::optional<uint64_t> offset = scratch.offsetOf(value))
      return DispatchArgDesc{true, *offset};
    return error(*launch) << "launch operand is neither a kernel argument nor "
                             "a temporary";
  }

  func::FuncOp func;
  const KernelDesc &kernel;
  ScratchLayout scratch;
};

} // namespace

FailureOr<std::vector<KernelCodeDesc>>
readCudaLaunchTables(ModuleOp kernels, const ProgramDesc &program) {
  std::vector<KernelCodeDesc> codes;
  for (const KernelDesc &kernel : program.kernels) {
    auto func = kernels.lookupSymbol<func::FuncOp>(kernel.name);
    if (!func)
      return kernels.emitError() << "internal error: kernel '" << kernel.name
                                 << "' is missing after the GPU mapping";
    FailureOr<KernelCodeDesc> code = LaunchTableReader(func, kernel).read();
    if (failed(code))
      return failure();
    codes.push_back(std::move(*code));
  }
  return codes;
}

} // namespace megc
