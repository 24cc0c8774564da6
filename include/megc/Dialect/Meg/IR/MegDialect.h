//===- MegDialect.h - The meg dialect ---------------------------*- C++ -*-===//
//
// Declares the meg dialect class.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGDIALECT_H
#define MEGC_DIALECT_MEG_IR_MEGDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "megc/Dialect/Meg/IR/MegDialect.h.inc"

#endif // MEGC_DIALECT_MEG_IR_MEGDIALECT_H
