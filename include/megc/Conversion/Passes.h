//===- Passes.h - megc conversion passes ------------------------*- C++ -*-===//
//
// Declares the conversion passes and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_CONVERSION_PASSES_H
#define MEGC_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace meg {

#define GEN_PASS_DECL
#include "megc/Conversion/Passes.h.inc"

/// Adds the meg-to-linalg rewrite patterns to `patterns`.
void populateMegToLinalgPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "megc/Conversion/Passes.h.inc"

} // namespace meg
} // namespace mlir

#endif // MEGC_CONVERSION_PASSES_H
