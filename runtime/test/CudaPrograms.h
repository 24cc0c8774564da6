// Test programs for the CUDA backend, on kernels written by hand in PTX.
#ifndef MEGRT_TEST_CUDAPROGRAMS_H
#define MEGRT_TEST_CUDAPROGRAMS_H

#include "ArtifactBuilder.h"

#include <cstdint>

namespace megrt::test {

/// Kernels written by hand for sm_90, every argument a device pointer:
/// add_f32 (c = a + b), twice_f32 (y = 2x) and reverse_shared (out = in
/// backwards, through 64 KiB of dynamic shared memory).
extern const char *const kPtx;

/// Elements of every tensor: a multiple of the 128 threads of the
/// elementwise launches, and at most the 1024 threads of reverse's block.
constexpr int64_t kN = 1024;
constexpr uint64_t kBytes = kN * sizeof(float);

/// Entry "step", every tensor f32[kN]: sum = x + y, through the arena and an
/// overlapping copy; scaled = 2x + w (w a parameter), through two launches
/// that pass 2x in the scratch area; reversed = x backwards, through 64 KiB
/// of shared memory, more than a kernel gets without opting in.
ProgramDesc kernelProgram();

/// Entry "accumulate": w += x in place (w a parameter, initially ones), and
/// out = the new w. Parameter "other" is not used by the entry.
ProgramDesc accumulateProgram();

} // namespace megrt::test

#endif // MEGRT_TEST_CUDAPROGRAMS_H
