//===- TensorParallelRewriter.h - what sharding rules build with -*- C++
//-*-===//
//
// The services meg-tensor-parallel gives the ops' sharding rules
// (TensorParallelOpInterface): the layout of every value over the
// tensor-parallel group, and the collectives that change it.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_TENSORPARALLELREWRITER_H
#define MEGC_DIALECT_MEG_IR_TENSORPARALLELREWRITER_H

#include "megc/Dialect/Meg/IR/MegAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mlir::meg {

/// How a value lies over the group: whole on every rank, split into
/// `parts` contiguous blocks along `dim` (rank r holding block r), or a
/// group's block: `dim` cut into `parts` blocks, of which tp / parts
/// consecutive ranks share one (key/value heads fewer than the ranks).
struct TpLayout {
  enum Kind { Whole, Split, GroupBlock };
  Kind kind = Whole;
  int64_t dim = -1;
  int64_t parts = 1;

  static TpLayout make(Kind kind, int64_t dim, int64_t parts) {
    return {kind, dim, parts};
  }
  bool isWhole() const { return kind == Whole; }
  TpLayout moved(int64_t newDim) const { return {kind, newDim, parts}; }
  bool operator==(const TpLayout &other) const {
    return kind == other.kind && dim == other.dim && parts == other.parts;
  }
  bool operator!=(const TpLayout &other) const { return !(*this == other); }
};

/// What a rule reads and builds with. Values a rule creates get the
/// transformer layer (`meg.layer`) of the op they are built for.
class TensorParallelRewriter {
public:
  virtual ~TensorParallelRewriter() = default;

  /// Ranks of the group, and whether activations outside the column/row
  /// pairs hold this rank's block of the sequence (dim 1).
  virtual int64_t ranks() const = 0;
  virtual bool sequenceParallel() const = 0;

  virtual TpLayout layoutOf(Value value) const = 0;
  bool isSplit(Value value) const { return !layoutOf(value).isWhole(); }
  /// The whole extents of a value whose type is this rank's part.
  virtual SmallVector<int64_t> wholeShape(Value value) const = 0;
  /// Gives a result of an op written for one device its layout, and the
  /// type of this rank's part.
  virtual void splitResult(Value value, const TpLayout &layout) = 0;
  /// Records the layout of a value built with its part's type already.
  virtual void setLayout(Value value, const TpLayout &layout) = 0;
  /// The split a tensor-parallel layer gave the parameter `weight` reads
  /// (a meg.param_ref), if any.
  virtual std::optional<TpLayout> paramSplitOf(Value weight) const = 0;

  /// Marks `value` as depending on trainable parameters (its gradient
  /// matters), or as `source` does.
  virtual void markTrainable(Value value) = 0;
  virtual void markTrainableLike(Value value, Value source) = 0;

  /// The builder, before `anchor` or right after it.
  virtual OpBuilder &buildAt(Operation *anchor) = 0;
  virtual OpBuilder &buildAfter(Operation *anchor) = 0;

  /// `value`, whole on every rank, entering the group (its gradient summed
  /// over the ranks) when it depends on trainable parameters.
  virtual Value enter(Value value) = 0;
  /// A split `value` gathered whole (once per value); fails, naming
  /// `user`, for a group's block.
  virtual FailureOr<Value> gathered(Value value, Operation *user) = 0;
  /// This rank's block along `dim` of a whole `value` (once per value).
  virtual Value sliced(Value value, int64_t dim) = 0;
  /// Gathers every split operand of `op`, which then runs on whole values.
  virtual LogicalResult makeWhole(Operation *op) = 0;
  /// Collectives over the group at the builder's insertion point.
  virtual Value allReduce(Value value, CollectiveReduce reduce) = 0;
  virtual Value reduceScatterAlong(Value partial, int64_t dim) = 0;
  /// The i32 first row of this rank's block of `blockSize` rows.
  virtual Value firstOfBlock(int64_t blockSize) = 0;
  /// This rank's share of a whole value cut into `groups` blocks along dim 0.
  virtual Value groupBlock(Value whole, int64_t groups) = 0;

  /// An error on `op`, prefixed with the pass's name.
  virtual InFlightDiagnostic error(Operation *op) = 0;
};

/// The one rule of the ops with the Elementwise trait: the result takes the
/// first split operand's layout (dimensions aligned at the end); operands
/// split another way are gathered, whole ones broadcast along the split
/// dimension enter the group, and the others are sliced.
LogicalResult layOutElementwise(Operation *op, TensorParallelRewriter &rw);

} // namespace mlir::meg

#endif // MEGC_DIALECT_MEG_IR_TENSORPARALLELREWRITER_H
