//===- Passes.h - meg dialect passes ----------------------------*- C++ -*-===//
//
// Declares the passes of the meg dialect and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_TRANSFORMS_PASSES_H
#define MEGC_DIALECT_MEG_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::meg {

#define GEN_PASS_DECL
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"

} // namespace mlir::meg

#endif // MEGC_DIALECT_MEG_TRANSFORMS_PASSES_H
