//===- MegTypes.cpp - meg types ----------------------------------------===//
//
// Type definitions of the meg dialect.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::meg;

#define GET_TYPEDEF_CLASSES
#include "megc/Dialect/Meg/IR/MegTypes.cpp.inc"

void MegDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "megc/Dialect/Meg/IR/MegTypes.cpp.inc"
      >();
}
