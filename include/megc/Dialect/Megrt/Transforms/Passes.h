//===- Passes.h - megrt dialect passes --------------------------*- C++ -*-===//
//
// Declares the passes over the executable program and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEGRT_TRANSFORMS_PASSES_H
#define MEGC_DIALECT_MEGRT_TRANSFORMS_PASSES_H

#include "megc/Dialect/Megrt/IR/MegrtDialect.h"

#include "mlir/Pass/Pass.h"

namespace megc::rt {

#define GEN_PASS_DECL
#include "megc/Dialect/Megrt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megc/Dialect/Megrt/Transforms/Passes.h.inc"

} // namespace megc::rt

#endif // MEGC_DIALECT_MEGRT_TRANSFORMS_PASSES_H
