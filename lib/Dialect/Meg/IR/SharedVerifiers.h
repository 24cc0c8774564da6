//===- SharedVerifiers.h - checks shared by forward/backward ops -*- C++ -*-===//
//
// Operand checks that a forward op and its backward op both need; defined
// next to the forward op in MegNNOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_IR_SHAREDVERIFIERS_H
#define MEGC_LIB_DIALECT_MEG_IR_SHAREDVERIFIERS_H

#include "megc/Dialect/Meg/IR/MegOps.h"

namespace mlir::meg {

/// Checks the input and cos/sin tables of meg.rope / meg.rope_grad.
LogicalResult verifyRopeOperands(Operation *op, Value input, Value cos,
                                 Value sin, RopeLayout layout);

/// Infers the attention output `[B, Sq, H, Dv]` from bshd q, k and v.
LogicalResult inferAttentionType(std::optional<Location> loc,
                                 StringRef opName, Type queryType,
                                 Type keyType, Type valueType,
                                 SmallVectorImpl<Type> &inferred);

/// Checks an attention's scale: > 0 and within f32 (the scores are f32).
LogicalResult verifyAttentionScale(std::optional<Location> loc,
                                   StringRef opName, double scale);

/// Checks an attention's optional query positions: with `causal`, one i32
/// per query.
LogicalResult verifyAttentionPositions(std::optional<Location> loc,
                                       StringRef opName, Value positions,
                                       Type queryType, bool causal);

/// The softmax statistics of attention over bshd `query`: `[B, H, Sq]` f32.
RankedTensorType attentionStatsType(RankedTensorType query);

/// Checks that `axis` indexes a dimension of `type`.
LogicalResult verifyAxis(Operation *op, int64_t axis, Type type);

/// Checks logits `[..., V]` against labels `[...]`, the reduction kind and
/// the ignore index (only with `sum`).
LogicalResult verifyLogitsLabels(std::optional<Location> loc,
                                 StringRef opName, Type logitsType,
                                 Type labelsType, ReduceKind reduction,
                                 std::optional<int64_t> ignoreIndex);

/// Checks vocab_shard_stats' (and its gradient's) max and labels: the
/// logits' shape without its last dimension.
LogicalResult verifyVocabShardOperands(Operation *op, Value logits, Value max,
                                       Value labels);

/// Checks that `weight` is 1-D and matches the last dim of `input`.
LogicalResult verifyNormWeight(Operation *op, StringRef what, Value input,
                               Value weight);

/// Checks that a normalisation epsilon is positive.
LogicalResult verifyEps(Operation *op, double eps);

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_IR_SHAREDVERIFIERS_H
