// Host builds of the runtime's own CUDA kernels (runtime/src/cuda/**/*.cu)
// for the GPU emulator: included before a .cu file compiled as C++, it
// turns CUDA's qualifiers into C++ and its thread ids, barriers, shuffles
// and atomics into the emulator's (megemu/Emulator.h). Blocks run one at a
// time on one host thread, so __shared__ variables are thread_local and an
// atomic is a plain read-modify-write.
#ifndef MEGEMU_STANDIN_CUDAONHOST_H
#define MEGEMU_STANDIN_CUDAONHOST_H

#include "megemu/Emulator.h"

// CUDA's own headers first: they name struct members gridDim and blockDim,
// which the macros below would replace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

// CUDA's headers define these for a host compiler; here they change.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ thread_local

#define threadIdx (::megemu::threadIdx())
#define blockIdx (::megemu::blockIdx())
#define blockDim (::megemu::blockDim())
#define gridDim (::megemu::gridDim())

inline void __syncthreads() { ::megemu::syncThreads(); }

/// __shfl_xor_sync over the full warp, for 32- and 64-bit values.
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32 or 64 bits");
  (void)mask;
  uint32_t words[sizeof(T) / 4];
  std::memcpy(words, &value, sizeof(T));
  for (uint32_t &word : words)
    word = ::megemu::shuffle(word, laneMask, width, ::megemu::kShuffleXor);
  std::memcpy(&value, words, sizeof(T));
  return value;
}

template <typename T> T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}

inline float __fadd_rn(float a, float b) { return a + b; }

#endif // MEGEMU_STANDIN_CUDAONHOST_H
