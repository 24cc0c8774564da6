//===- Patterns.h - meg-to-linalg pattern groups ----------------*- C++ -*-===//
//
// Each pattern file adds its group of rewrites through one of these.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_CONVERSION_MEGTOLINALG_PATTERNS_H
#define MEGC_LIB_CONVERSION_MEGTOLINALG_PATTERNS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::meg {
void populateElementwisePatterns(RewritePatternSet &patterns);
void populateShapePatterns(RewritePatternSet &patterns);
void populateNormPatterns(RewritePatternSet &patterns);
void populateContractionPatterns(RewritePatternSet &patterns);
void populateLossPatterns(RewritePatternSet &patterns);
void populateGradPatterns(RewritePatternSet &patterns);
void populateOptimizerPatterns(RewritePatternSet &patterns);
void populateMoePatterns(RewritePatternSet &patterns);
} // namespace mlir::meg

#endif // MEGC_LIB_CONVERSION_MEGTOLINALG_PATTERNS_H
