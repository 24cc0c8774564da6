// The flash-attention kernels, instantiated for each element type and
// head-dimension tier under the names CudaAttention looks up: nvcc compiles
// this file into the fatbin the runtime embeds.
#include "cuda/attention/FlashAttentionKernels.cuh"

using megrt::attention::AttentionParams;
using megrt::attention::Float4;
using megrt::attention::kThreads;

/// The dynamic shared memory of every kernel: 16-byte aligned for the
/// tiles' vector accesses.
extern __shared__ Float4 attentionShared[];

// Blocks per SM: two forward blocks of the 64 and 128 tiers fit in shared
// memory, so their registers are capped at 128; every other kernel runs one
// block per SM (shared memory allows no more) and may use up to 255
// registers rather than spill its accumulators.
#define MEGRT_ATTENTION_TIER(T, NAME, TIER)                                    \
  extern "C" __global__ void __launch_bounds__(kThreads, TIER <= 128 ? 2 : 1)  \
      megrt_attention_fwd_##NAME##_d##TIER(AttentionParams p) {                \
    megrt::attention::attentionForwardBlock<T, TIER, false>(                   \
        p, reinterpret_cast<float *>(attentionShared));                        \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      megrt_attention_bwd_stats_##NAME##_d##TIER(AttentionParams p) {          \
    megrt::attention::attentionForwardBlock<T, TIER, true>(                    \
        p, reinterpret_cast<float *>(attentionShared));                        \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      megrt_attention_bwd_kv_##NAME##_d##TIER(AttentionParams p) {             \
    megrt::attention::attentionBackwardBlock<T, TIER>(                         \
        p, reinterpret_cast<float *>(attentionShared));                        \
  }

#define MEGRT_ATTENTION_TYPE(T, NAME)                                          \
  MEGRT_ATTENTION_TIER(T, NAME, 64)                                            \
  MEGRT_ATTENTION_TIER(T, NAME, 128)                                           \
  MEGRT_ATTENTION_TIER(T, NAME, 256)                                           \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      megrt_attention_bwd_dq_##NAME(AttentionParams p) {                       \
    megrt::attention::convertDq<T>(p);                                         \
  }

MEGRT_ATTENTION_TYPE(float, f32)
MEGRT_ATTENTION_TYPE(__nv_bfloat16, bf16)
MEGRT_ATTENTION_TYPE(__half, f16)
