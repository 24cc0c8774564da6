// The shape of a fused attention call, shared by the CPU and CUDA backends.
#ifndef MEGRT_SRC_ATTENTIONSHAPE_H
#define MEGRT_SRC_ATTENTIONSHAPE_H

#include "Fail.h"
#include "megrt/DType.h"

#include <cstdint>
#include <string>

namespace megrt {

/// Scaled dot-product attention in the bshd layout, as meg.attention and
/// meg.attention_grad define it: q [batch, seqQ, heads, headDim], k [batch,
/// seqKv, kvHeads, headDim], v [batch, seqKv, kvHeads, valueDim], out [batch,
/// seqQ, heads, valueDim]. Query head h reads KV head h / (heads / kvHeads).
/// With `causal`, query i sees key j only when j <= i + (seqKv - seqQ); a
/// query that sees no key (possible only when seqQ > seqKv) gets zeros and
/// passes no gradient. Every tensor has `dtype`; the math is f32.
struct AttentionShape {
  int64_t batch, seqQ, seqKv, heads, kvHeads, headDim, valueDim;
  bool causal;
  float scale;
  DType dtype;
};

/// "attention f32 B=2 Sq=5 Skv=7 H=4 Hkv=2 D=64 Dv=64 causal", for messages.
inline std::string describeAttention(const AttentionShape &s) {
  return concat("attention ", dtypeName(s.dtype), " B=", s.batch,
                " Sq=", s.seqQ, " Skv=", s.seqKv, " H=", s.heads,
                " Hkv=", s.kvHeads, " D=", s.headDim, " Dv=", s.valueDim,
                s.causal ? " causal" : "");
}

/// Fails unless every dimension is positive, heads is a multiple of kvHeads
/// and the dtype is f32, bf16 or f16.
inline void checkAttentionShape(const AttentionShape &s) {
  if (s.batch <= 0 || s.seqQ <= 0 || s.seqKv <= 0 || s.heads <= 0 ||
      s.kvHeads <= 0 || s.headDim <= 0 || s.valueDim <= 0)
    fail(describeAttention(s), ": every dimension must be positive");
  if (s.heads % s.kvHeads != 0)
    fail(describeAttention(s), ": H=", s.heads,
         " must be a multiple of Hkv=", s.kvHeads);
  if (!isFloatingPoint(s.dtype))
    fail(describeAttention(s), ": expects f32, bf16 or f16 tensors");
}

} // namespace megrt

#endif // MEGRT_SRC_ATTENTIONSHAPE_H
