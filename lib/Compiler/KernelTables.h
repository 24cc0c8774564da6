//===- KernelTables.h - the code of each kernel, read back -----*- C++ -*-===//
//
// After the back-end pipelines, each kernel function is a host-side
// description of its code: temporaries (memref.alloc, its scratch) and its
// dispatches (CPU: scf.forall calling a dispatch function; CUDA:
// gpu.launch_func). These readers turn it into the artifact's tables.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_COMPILER_KERNELTABLES_H
#define MEGC_LIB_COMPILER_KERNELTABLES_H

#include "megc/Compiler/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

namespace megc {

/// The kernel's #meg.kernel_strategy (serial when it has none).
KernelStrategyDesc strategyOf(mlir::func::FuncOp kernel);

/// Offsets of a kernel's temporaries in its scratch area: each starts at a
/// multiple of `alignment` bytes (what the buffers the kernels were
/// written against guarantee).
class ScratchLayout {
public:
  explicit ScratchLayout(uint64_t alignment) : alignment(alignment) {}
  /// Places `alloc`; fails on a temporary without a static shape.
  mlir::LogicalResult place(mlir::memref::AllocOp alloc);
  /// The scratch offset of a placed temporary.
  std::optional<uint64_t> offsetOf(mlir::Value value) const;
  uint64_t bytes() const { return total; }

private:
  uint64_t alignment, total = 0;
  llvm::DenseMap<mlir::Value, uint64_t> offsets;
};

/// The CPU code of every kernel of `program` (in its order) from the
/// outlined kernel module: each forall of a kernel function is a dispatch
/// of its called function's entry (`<function>_entry`).
mlir::FailureOr<std::vector<KernelCodeDesc>>
readCpuDispatchTables(mlir::ModuleOp kernels, const ProgramDesc &program);

/// The CUDA code of every kernel of `program` (in its order): each kernel
/// function's gpu.launch_func sequence, with constant sizes and every
/// argument traced through views to a kernel argument or a temporary.
/// Fails, naming the op, on host code that is not a launch, a view, an
/// allocation or a constant.
mlir::FailureOr<std::vector<KernelCodeDesc>>
readCudaLaunchTables(mlir::ModuleOp kernels, const ProgramDesc &program);

} // namespace megc

#endif // MEGC_LIB_COMPILER_KERNELTABLES_H
