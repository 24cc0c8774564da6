//===- CudaLowering.h - steps of the CUDA kernel generator -----*- C++ -*-===//
//
// The kernel functions become host functions that only launch GPU code:
// loops are reshaped so that every loop nest maps onto blocks and threads,
// and the launches are read back into the artifact's launch table.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_COMPILER_CUDALOWERING_H
#define MEGC_LIB_COMPILER_CUDALOWERING_H

#include "megc/Compiler/Program.h"

#include "mlir/IR/BuiltinOps.h"

namespace megc {

/// Reorders the loops of every linalg op so that parallel dimensions come
/// before reductions: the parallel ones then map onto threads and each
/// thread runs its reduction serially, instead of a host loop of launches.
void hoistParallelDimensions(mlir::ModuleOp kernels);

/// After linalg became loops: wraps each run of code left at the top level
/// of a kernel function (scalar code, serial reductions) into a one-iteration
/// scf.parallel, so that it runs on the device too, and collapses every
/// loop nest into one dimension. Fails, naming the op, on code that cannot
/// be moved (a value it defines is used by code that stays on the host).
mlir::LogicalResult prepareParallelLoops(mlir::ModuleOp kernels);

/// Clones the constants (memref.get_global) that a gpu.launch reads into its
/// body, so that outlining copies the globals into the device module.
void sinkGlobalsIntoLaunches(mlir::ModuleOp kernels);

/// Reads every kernel function's gpu.launch_func sequence into its
/// KernelDesc: entry names, grid and block sizes, and each argument traced
/// through views to a kernel argument or a temporary, which gets an offset
/// in the kernel's scratch area. Fails, naming the op, on host code that is
/// not a launch, a view, an allocation or a constant.
mlir::LogicalResult readLaunchTable(mlir::ModuleOp kernels,
                                    ProgramDesc &program);

} // namespace megc

#endif // MEGC_LIB_COMPILER_CUDALOWERING_H
