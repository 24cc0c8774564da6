// The launch contract of the flash-attention kernels: their one argument,
// tile sizes and shared memory, shared by the kernels and the host.
#ifndef MEGRT_SRC_CUDA_ATTENTION_FLASHATTENTIONPARAMS_H
#define MEGRT_SRC_CUDA_ATTENTION_FLASHATTENTIONPARAMS_H

#include <cstdint>

// The helpers below size tiles in the kernels and launches on the host.
#ifdef __CUDACC__
#define MEGRT_ATTENTION_HOST_DEVICE __host__ __device__
#else
#define MEGRT_ATTENTION_HOST_DEVICE
#endif

namespace megrt::attention {

/// Threads of every attention kernel's block.
constexpr int kThreads = 256;

/// Head-dimension tiers: a kernel instantiated for tier T serves every
/// max(headDim, valueDim) up to T, its shared-memory rows padded with zeros.
constexpr int kTiers[] = {64, 128, 256};

/// The forward (and the backward's statistics kernel) runs one block per 64
/// query rows of one head and walks the keys 64 at a time.
constexpr int kForwardQueries = 64;
constexpr int kForwardKeys = 64;

/// The backward's dk/dv kernel runs one block per tile of keys of one KV
/// head, walking every query tile of the heads sharing it. The tile has 32
/// keys in the 256 tier, so that its shared memory fits in 227 KiB.
MEGRT_ATTENTION_HOST_DEVICE constexpr int backwardKeys(int tier) {
  return tier == 256 ? 32 : 64;
}
constexpr int kBackwardQueries = 64;

/// f32 shared-memory rows are padded by 4 floats: rows stay 16-byte aligned
/// for vector loads, and threads reading rows that are 1 apart hit
/// different banks.
MEGRT_ATTENTION_HOST_DEVICE constexpr int paddedRow(int columns) {
  return columns + 4;
}

/// Q tile, K (then V) tile, the probabilities, and each query's last
/// visible key.
MEGRT_ATTENTION_HOST_DEVICE constexpr unsigned forwardSharedBytes(int tier) {
  return 4u * ((kForwardQueries + kForwardKeys) * paddedRow(tier) +
               kForwardQueries * paddedRow(kForwardKeys) + kForwardQueries);
}

/// K, V, Q and dO tiles, P and dS (keys x queries), and the queries'
/// log-sum-exp and delta.
MEGRT_ATTENTION_HOST_DEVICE constexpr unsigned backwardSharedBytes(int tier) {
  return 4u * (2 * (backwardKeys(tier) + kBackwardQueries) * paddedRow(tier) +
               2 * backwardKeys(tier) * paddedRow(kBackwardQueries) +
               2 * kBackwardQueries);
}

/// The one argument of every attention kernel. Addresses are device
/// pointers; the layout is the bshd one of megrt::AttentionShape. Backward
/// scratch: lse (base 2) and delta are [batch][heads][seqQ] f32, dqAccum
/// has dq's shape in f32. stats, when not 0, are the softmax statistics
/// that the forward writes and the backward reads ([batch][heads][seqQ]
/// f32 log-sum-exp, natural log). positions, when not 0, are the queries'
/// positions in the key sequence ([seqQ] i32, non-decreasing; causal only).
struct AttentionParams {
  uint64_t q, k, v, out, dout, dq, dk, dv;
  uint64_t lse, delta, dqAccum, stats, positions;
  int64_t batch, seqQ, seqKv, heads, kvHeads, headDim, valueDim;
  /// The softmax runs in base 2: scores are q . k * scale * log2(e).
  float scale, scaleLog2e;
  int32_t causal;
};

} // namespace megrt::attention

#endif // MEGRT_SRC_CUDA_ATTENTION_FLASHATTENTIONPARAMS_H
