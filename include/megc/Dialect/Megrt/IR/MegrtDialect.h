//===- MegrtDialect.h - The megrt dialect -----------------------*- C++ -*-===//
//
// Declares the megrt dialect (the executable program), its types and ops.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEGRT_IR_MEGRTDIALECT_H
#define MEGC_DIALECT_MEGRT_IR_MEGRTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace megc::rt {

/// Declares a buffer rather than running a command (Megrt.td).
template <typename ConcreteType>
class BufferDeclaration
    : public mlir::OpTrait::TraitBase<ConcreteType, BufferDeclaration> {};

} // namespace megc::rt

#include "megc/Dialect/Megrt/IR/MegrtDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "megc/Dialect/Megrt/IR/MegrtTypes.h.inc"

#define GET_OP_CLASSES
#include "megc/Dialect/Megrt/IR/MegrtOps.h.inc"

#endif // MEGC_DIALECT_MEGRT_IR_MEGRTDIALECT_H
