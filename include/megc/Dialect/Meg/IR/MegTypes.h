//===- MegTypes.h - meg types -----------------------------------*- C++ -*-===//
//
// Declares the types of the meg dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGTYPES_H
#define MEGC_DIALECT_MEG_IR_MEGTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "megc/Dialect/Meg/IR/MegTypes.h.inc"

#endif // MEGC_DIALECT_MEG_IR_MEGTYPES_H
