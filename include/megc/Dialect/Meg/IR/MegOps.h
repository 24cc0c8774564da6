//===- MegOps.h - meg operations --------------------------------*- C++ -*-===//
//
// Declares the operations of the meg dialect (and pulls in its attributes
// and types, which the op classes use).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGOPS_H
#define MEGC_DIALECT_MEG_IR_MEGOPS_H

#include "megc/Dialect/Meg/IR/MegAttrs.h"
#include "megc/Dialect/Meg/IR/MegDialect.h"
#include "megc/Dialect/Meg/IR/MegTraits.h"
#include "megc/Dialect/Meg/IR/MegTypes.h"
#include "megc/Dialect/Meg/IR/TensorParallelRewriter.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::meg {
/// The resource every collective reads and writes, which keeps collectives
/// in program order (all ranks must issue them in the same order).
struct CommResource : public SideEffects::Resource::Base<CommResource> {
  StringRef getName() final { return "<meg.comm>"; }
};
/// The persistent parameters, written by meg.param_store.
struct ParamResource : public SideEffects::Resource::Base<ParamResource> {
  StringRef getName() final { return "<meg.params>"; }
};
} // namespace mlir::meg

#include "megc/Dialect/Meg/IR/MegInterfaces.h.inc"

#define GET_OP_CLASSES
#include "megc/Dialect/Meg/IR/MegOps.h.inc"

namespace mlir {
class FunctionOpInterface;
namespace meg {
/// The trainable parameter whose gradient result `index` of `func` is
/// (`meg.grad_of`), or null.
ParamOp gradientParam(FunctionOpInterface func, unsigned index);
/// Records that result `index` of `func` is the gradient of `param`.
void setGradientParam(FunctionOpInterface func, unsigned index, ParamOp param);
} // namespace meg
} // namespace mlir

#endif // MEGC_DIALECT_MEG_IR_MEGOPS_H
