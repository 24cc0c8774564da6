//===- MegAttrs.h - meg enums and attributes --------------------*- C++ -*-===//
//
// Declares the enums and attributes of the meg dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGATTRS_H
#define MEGC_DIALECT_MEG_IR_MEGATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "megc/Target/CudaArch.h"

#include "megc/Dialect/Meg/IR/MegEnums.h.inc"

namespace mlir::meg {
/// Prints a double in its shortest form that parses back to the same value.
void printF64(AsmPrinter &printer, double value);
/// Parses a double written as a float or integer literal.
FailureOr<double> parseF64(AsmParser &parser);
/// Parses a double into an f64 APFloat (the storage of float parameters).
FailureOr<llvm::APFloat> parseF64AsAPFloat(AsmParser &parser);
} // namespace mlir::meg

#define GET_ATTRDEF_CLASSES
#include "megc/Dialect/Meg/IR/MegAttrs.h.inc"

#endif // MEGC_DIALECT_MEG_IR_MEGATTRS_H
