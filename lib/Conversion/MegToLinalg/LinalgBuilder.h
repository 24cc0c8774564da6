//===- LinalgBuilder.h - helpers for meg-to-linalg patterns -----*- C++ -*-===//
//
// Builders for the linalg.generic shapes the meg lowering needs: broadcast
// elementwise maps, reductions with f32 accumulation, and compute-type
// conversion (bf16/f16 work in f32 and round once on store).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_CONVERSION_MEGTOLINALG_LINALGBUILDER_H
#define MEGC_LIB_CONVERSION_MEGTOLINALG_LINALGBUILDER_H

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::meg {

/// Body callback: builds the scalar result from the block's scalar inputs
/// (already converted to the compute type).
using ScalarFn = llvm::function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// f32 for the float types (compute in f32), the type itself otherwise.
Type computeType(Type element);
/// Converts a scalar to its compute type (extf for bf16/f16).
Value toCompute(OpBuilder &b, Location loc, Value scalar);
/// Converts a compute scalar to `target` (truncf, fptosi, sitofp, ...).
Value convertScalar(OpBuilder &b, Location loc, Value scalar, Type target);

/// A float constant of type `type`.
Value floatConstant(OpBuilder &b, Location loc, Type type, double value);

/// `tensor.empty` of `type`.
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type);
/// A tensor of `type` filled with `value`.
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value);

/// The map reading an operand of `operandShape` at the index of a result of
/// `resultShape` under NumPy broadcasting.
AffineMap broadcastMap(MLIRContext *context, ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape);

SmallVector<utils::IteratorType> parallelIterators(int64_t rank);

/// Elementwise generic producing `resultType` from broadcast `inputs`;
/// `fn` sees compute-type scalars and returns a compute-type scalar.
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ScalarFn fn);

/// Generic with explicit maps for the inputs over the loop space of
/// `resultType` (all parallel); `fn` sees compute-type scalars and may read
/// other tensors with tensor.extract at `linalg.index` positions.
Value buildMapped(OpBuilder &b, Location loc, RankedTensorType resultType,
                  ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                  ScalarFn fn);

enum class Combine { Sum, Max };

/// Reduces `input` over `dims` into an f32 tensor (dims dropped), applying
/// `fn` to each element (compute-type scalars of `input` and of `extra`
/// tensors read with maps `extraMaps` over the input's loop space) before
/// combining. Sum starts at 0, Max at -inf.
Value buildReduction(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> dims, Combine combine,
                     ValueRange extra = {}, ArrayRef<AffineMap> extraMaps = {},
                     ScalarFn fn = nullptr);

/// The row statistics of a softmax along `axis`: max and sum of
/// exp(x - max), f32, with the map that reads them over the input's space.
struct SoftmaxStats {
  Value max, sumExp;
  AffineMap rowMap;
};
SoftmaxStats buildSoftmaxStats(OpBuilder &b, Location loc, Value input,
                               int64_t axis);

/// Map of a tensor of rank `rank - dims.size()` (the reduced one) read over
/// a loop space of `rank` dims.
AffineMap reducedMap(MLIRContext *context, int64_t rank,
                     ArrayRef<int64_t> dims);

/// A row-major reshape of `input` to `shape` (a view after bufferization).
Value reshapeTensor(OpBuilder &b, Location loc, Value input,
                    ArrayRef<int64_t> shape);

/// An affine map over `dims` loop dims.
AffineMap mapOf(MLIRContext *context, int64_t dims, ArrayRef<AffineExpr> exprs);

/// Sum over the reduction loops of lhs * rhs into an f32 tensor of `shape`
/// (maps: lhs, rhs, output).
Value contract(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Value lhs,
               Value rhs, ArrayRef<AffineMap> maps,
               ArrayRef<utils::IteratorType> iterators);

/// Rounds an f32 accumulator to `type`, adding `bias` along the last dim.
Value finish(OpBuilder &b, Location loc, Value acc, RankedTensorType type,
             Value bias = Value());

/// Attention probabilities p[b, h, s, t] (f32) of bshd q and k with grouped
/// KV heads: softmax over t of q.k * scale, keys after the query position
/// (its entry of `positions` when given, else end-aligned) masked when
/// `causal`.
Value buildAttentionProbs(OpBuilder &b, Location loc, Value query, Value key,
                          Value positions, bool causal, double scale);

/// Clamps an integer id into [0, size) as an index, so that a bad id
/// cannot read outside the tensor it indexes.
Value clampedIndex(OpBuilder &b, Location loc, Value id, int64_t size);

/// An integer id relative to a block starting at `first` (a 0-d integer
/// tensor, a vocab-parallel rank's first row or class): `id - first` as an
/// index.
Value localIndex(OpBuilder &b, Location loc, Value id, Value first);

/// An id's place in a block of `size` starting at `first`: the index into
/// the block (clamped into it, so that it can always be read) and whether
/// the id lies in the block.
struct BlockIndex {
  Value index, inBlock;
};
BlockIndex blockIndex(OpBuilder &b, Location loc, Value id, Value first,
                      int64_t size);

/// Whether an integer label counts toward a loss: `label != ignoreIndex`.
Value countsTowardLoss(OpBuilder &b, Location loc, Value label,
                       int64_t ignoreIndex);

/// Scalar helpers for bodies.
Value sigmoid(OpBuilder &b, Location loc, Value x);

} // namespace mlir::meg

#endif // MEGC_LIB_CONVERSION_MEGTOLINALG_LINALGBUILDER_H
