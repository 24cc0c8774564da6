//===- TensorSizes.h - sizes of tensors, checked for overflow ---*- C++ -*-===//
//
// The one place where a tensor's element count and bytes are computed from
// its shape: every product is checked, and a tensor above the ceiling is an
// error, so that no offset, shard, stride or memory plan computed from the
// sizes of accepted tensors can wrap around.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_TENSORSIZES_H
#define MEGC_DIALECT_MEG_IR_TENSORSIZES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::meg {

/// The most bytes one tensor may have: 2^48 (256 TiB), far above any
/// device's memory and far enough below 2^63 that sums and products of
/// accepted sizes (offsets, arenas, strides over a few dimensions) cannot
/// wrap around.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 48;

/// The elements of `shape`, or nullopt when a dimension is negative or the
/// product overflows 64 bits.
std::optional<uint64_t> checkedElements(llvm::ArrayRef<int64_t> shape);

/// The bytes of `shape` elements of `elementBits` bits each, or nullopt
/// when that overflows 64 bits.
std::optional<uint64_t> checkedBytes(llvm::ArrayRef<int64_t> shape,
                                     unsigned elementBits);

/// "" when a tensor of `shape` and `elementBits` fits the ceiling, else
/// what is wrong ("has shape [..], whose size in bytes exceeds 2^48 ...").
std::string tensorSizeProblem(llvm::ArrayRef<int64_t> shape,
                              unsigned elementBits);

/// Checks every ranked tensor that `root` holds (op results, block
/// arguments, parameter types) against the ceiling: the first that does not
/// fit is an error at its op, and failure.
LogicalResult verifyTensorSizes(Operation *root);

/// Checks every floating-point literal (arith.constant) under `root`: a
/// non-finite element is a literal that did not fit its type (1.0e400 in
/// f32 parses as infinity) and an error at its op.
LogicalResult verifyLiterals(Operation *root);

} // namespace mlir::meg

#endif // MEGC_DIALECT_MEG_IR_TENSORSIZES_H
