//===- KernelLowering.h - steps shared by the kernel generators -*- C++ -*-===//
//
// The target-neutral part of kernel generation: meg to linalg, results
// materialised, bufferization with results as out-parameters.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_COMPILER_KERNELLOWERING_H
#define MEGC_LIB_COMPILER_KERNELLOWERING_H

#include "mlir/IR/BuiltinOps.h"

namespace megc {

/// Runs a textual pass pipeline (`builtin.module(...)`) on `module`.
mlir::LogicalResult runPipeline(mlir::ModuleOp module, llvm::StringRef text);

/// Lowers the kernel functions of `kernels` to linalg on memrefs, each
/// `func(inputs..., outputs...)` writing its results into the out-params.
mlir::LogicalResult bufferizeKernels(mlir::ModuleOp kernels);

} // namespace megc

#endif // MEGC_LIB_COMPILER_KERNELLOWERING_H
