// Fused scaled-dot-product attention on the CPU, forward and backward.
#ifndef MEGRT_SRC_CPU_CPUATTENTION_H
#define MEGRT_SRC_CPU_CPUATTENTION_H

#include "AttentionShape.h"

namespace megrt {

/// out = softmax(q k^T * scale (+ causal mask)) v, every tensor of
/// shape.dtype in the bshd layout of AttentionShape. Keys are visited in
/// tiles with an online softmax (running maximum and sum), so the memory used
/// besides the tensors is a few tiles, never seqQ x seqKv; the math is f32
/// and each output element is rounded once.
void attentionForward(const AttentionShape &shape, const void *q, const void *k,
                      const void *v, void *out);

/// The gradients dq, dk, dv of attentionForward given the output gradient
/// dout and the forward's output `out`, recomputing the probabilities tile
/// by tile. dk and dv sum over the query heads that share a KV head. Besides
/// tiles, uses f32 accumulators of one KV head's dk and dv (seqKv x (headDim
/// + valueDim) floats), so that each output is rounded once.
void attentionBackward(const AttentionShape &shape, const void *dout,
                       const void *q, const void *k, const void *v,
                       const void *out, void *dq, void *dk, void *dv);

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUATTENTION_H
