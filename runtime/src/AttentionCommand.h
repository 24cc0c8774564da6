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
/// q, k, v, out, and for the backward grad_out, grad_q, grad_k, grad_v.
struct AttentionOperands {
  uint32_t q, k, v, out;
  uint32_t gradOut = 0, gradQ = 0, gradK = 0, gradV = 0;
  bool backward = false;
  AttentionShape shape;
};

/// Null when `command` is neither.
inline std::optional<AttentionOperands>
attentionOperands(const fb::Command &command) {
  if (const fb::Attention *a = command.op_as_Attention())
    return AttentionOperands{a->q(), a->k(), a->v(), a->out(), 0, 0, 0, 0,
                             false, toAttentionShape(*a->dims(), a->dtype())};
  if (const fb::AttentionGrad *g = command.op_as_AttentionGrad())
    return AttentionOperands{g->q(),      g->k(),      g->v(),
                             g->out(),    g->grad_out(), g->grad_q(),
                             g->grad_k(), g->grad_v(), true,
                             toAttentionShape(*g->dims(), g->dtype())};
  return std::nullopt;
}

} // namespace megrt

#endif // MEGRT_SRC_ATTENTIONCOMMAND_H
