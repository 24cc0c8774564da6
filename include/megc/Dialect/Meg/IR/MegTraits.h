//===- MegTraits.h - op classes of the meg dialect --------------*- C++ -*-===//
//
// The traits that classify meg ops (Meg_Pointwise, Meg_Elementwise,
// Meg_RowReduction in MegBase.td, which documents them). They carry no
// verification: a trait is the op's definition saying which class it is in, so
// that passes ask `op->hasTrait<meg::Elementwise>()` instead of keeping lists
// of ops.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGTRAITS_H
#define MEGC_DIALECT_MEG_IR_MEGTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::meg {

/// Each result element is computed from operand elements at a projection of
/// its index, with no reduction (loop-fusible).
template <typename ConcreteType>
class Pointwise : public OpTrait::TraitBase<ConcreteType, Pointwise> {};

/// Pointwise with NumPy broadcasting (trailing dimensions aligned).
template <typename ConcreteType>
class Elementwise : public OpTrait::TraitBase<ConcreteType, Elementwise> {};

/// Reduces along one dimension, independently at each index of the others
/// (a loop over rows).
template <typename ConcreteType>
class RowReduction : public OpTrait::TraitBase<ConcreteType, RowReduction> {};

/// A product of matrices (a GEMM on a device).
template <typename ConcreteType>
class MatrixProduct : public OpTrait::TraitBase<ConcreteType, MatrixProduct> {};

} // namespace mlir::meg

#endif // MEGC_DIALECT_MEG_IR_MEGTRAITS_H
