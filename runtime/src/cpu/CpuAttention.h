// Fused scaled-dot-product attention on the CPU, forward and backward.
#ifndef MEGRT_SRC_CPU_CPUATTENTION_H
#define MEGRT_SRC_CPU_CPUATTENTION_H

#include "AttentionShape.h"

namespace megrt {

class ThreadPool;

/// out = softmax(q k^T * scale (+ causal mask)) v, every tensor of
/// shape.dtype in the bshd layout of AttentionShape, on the pool's threads:
/// one unit per (batch, head, tile of 64 queries), whose keys are visited in
/// blocks of 256 with an online softmax (running maximum and sum), so the
/// memory used besides the tensors is a few tiles, never seqQ x seqKv. The
/// products are f32 matrix products of tiles, each output element rounded
/// once; the result does not depend on the number of threads. Unless
/// `stats` is null, it receives each query row's log-sum-exp (natural log)
/// of its scaled, masked scores, +inf for a row that sees no key:
/// [batch][heads][seqQ] f32. With `positions` (causal only, seqQ
/// non-decreasing i32) query i sees the keys up to positions[i] instead of
/// i + seqKv - seqQ.
void attentionForward(ThreadPool &pool, const AttentionShape &shape,
                      const void *q, const void *k, const void *v, void *out,
                      float *stats = nullptr,
                      const int32_t *positions = nullptr);

/// The gradients dq, dk, dv of attentionForward given the output gradient
/// dout and the forward's output `out`, recomputing the probabilities block
/// by block: one unit per (batch, KV head), which runs the query heads
/// sharing the KV head in order, each adding its part of dk and dv to f32
/// sums (seqKv x (headDim + valueDim) floats per unit) that are rounded
/// once; the result does not depend on the number of threads. Given the
/// forward's `stats` (as attentionForward writes them) it uses them, and
/// otherwise computes them first in a pass over the keys; the two are the
/// same bits.
void attentionBackward(ThreadPool &pool, const AttentionShape &shape,
                       const void *dout, const void *q, const void *k,
                       const void *v, const void *out, const float *stats,
                       void *dq, void *dk, void *dv,
                       const int32_t *positions = nullptr);

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUATTENTION_H
