//===- Passes.h - megc kernel back-end passes -------------------*- C++ -*-===//
//
// Declares the back-end passes (Passes.td) and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_KERNELS_PASSES_H
#define MEGC_KERNELS_PASSES_H

#include "megc/Dialect/Meg/IR/MegDialect.h"
#include "megc/Target/CudaArch.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace megc {

#define GEN_PASS_DECL
#include "megc/Kernels/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megc/Kernels/Passes.h.inc"

/// meg-set-target for a target already parsed (the driver's options): the
/// CPU with vector registers of `vectorBits`, or CUDA `arch`.
std::unique_ptr<mlir::Pass> createMegSetCpuTarget(unsigned vectorBits);
std::unique_ptr<mlir::Pass> createMegSetCudaTarget(const CudaArch &arch);

} // namespace megc

#endif // MEGC_KERNELS_PASSES_H
