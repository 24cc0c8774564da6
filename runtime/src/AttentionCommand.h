// The artifact's Attention and AttentionGrad commands as AttentionShape.
#ifndef MEGRT_SRC_ATTENTIONCOMMAND_H
#define MEGRT_SRC_ATTENTIONCOMMAND_H

#include "AttentionShape.h"
#include "FbTypes.h"
#include "megrt/megc_generated.h"

#include <optional>

namespace megrt {

inline AttentionShape toAttentionShape(const fb::AttentionDims &dims,
                                       fb::DType dtype) {
  return {dims.batch(),   dims.seq_q(),    dims.seq_kv(),
          dims.heads(),   dims.kv_heads(), dims.head_dim(),
          dims.value_dim(), dims.causal(), dims.scale(),
          toDType(dtype)};
}

/// The buffers of an Attention (backward false) or AttentionGrad command:
/// q, k, v, out, for the backward grad_out, grad_q, grad_k, grad_v, and the
/// softmax statistics that the forward writes or the backward reads, and
/// the queries' positions (-1: none).
struct AttentionOperands {
  uint32_t q = 0, k = 0, v = 0, out = 0;
  uint32_t gradOut = 0, gradQ = 0, gradK = 0, gradV = 0;
  int32_t stats = -1;
  int32_t positions = -1;
  bool backward = false;
  AttentionShape shape;
};

/// The elements of the softmax statistics of `shape`: [batch, heads, seqQ]
/// f32.
inline int64_t attentionStatsElements(const AttentionShape &shape) {
  return shape.batch * shape.heads * shape.seqQ;
}

/// Null when `command` is neither.
inline std::optional<AttentionOperands>
attentionOperands(const fb::Command &command) {
  AttentionOperands ops;
  if (const fb::Attention *a = command.op_as_Attention()) {
    ops.q = a->q();
    ops.k = a->k();
    ops.v = a->v();
    ops.out = a->out();
    ops.stats = a->stats();
    ops.positions = a->positions();
    ops.shape = toAttentionShape(*a->dims(), a->dtype());
    return ops;
  }
  if (const fb::AttentionGrad *g = command.op_as_AttentionGrad()) {
    ops.q = g->q();
    ops.k = g->k();
    ops.v = g->v();
    ops.out = g->out();
    ops.gradOut = g->grad_out();
    ops.gradQ = g->grad_q();
    ops.gradK = g->grad_k();
    ops.gradV = g->grad_v();
    ops.stats = g->stats();
    ops.positions = g->positions();
    ops.backward = true;
    ops.shape = toAttentionShape(*g->dims(), g->dtype());
    return ops;
  }
  return std::nullopt;
}

} // namespace megrt

#endif // MEGRT_SRC_ATTENTIONCOMMAND_H
