//===- ShapeUtils.h - shape helpers for meg verifiers -----------*- C++ -*-===//
//
// Small helpers shared by the op verifiers and type inference functions:
// shape printing for messages, broadcasting and axis normalisation.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_IR_SHAPEUTILS_H
#define MEGC_LIB_DIALECT_MEG_IR_SHAPEUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/DebugStringHelper.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>

namespace mlir::meg {

/// Renders a shape as `[2, 16, 64]` for diagnostics.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Reports an inference failure for op `opName` at `loc` (if any) and
/// returns failure; messages read like verifier messages.
LogicalResult inferError(std::optional<Location> loc, llvm::StringRef opName,
                         const llvm::Twine &message);

/// The NumPy broadcast of two shapes, or std::nullopt if incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// True if `from` broadcasts to exactly `to`.
bool broadcastsTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);

/// Converts a float type conversion to whether it is exact for every value
/// (f16 -> f32, bf16 -> f32, same type).
bool isExactFloatWidening(Type from, Type to);

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_IR_SHAPEUTILS_H
