// GEMM on the CPU through CBLAS, with f32 scratch for 16-bit dtypes.
#ifndef MEGRT_SRC_CPU_CPUGEMM_H
#define MEGRT_SRC_CPU_CPUGEMM_H

#include "GemmParams.h"

#include <cstdint>
#include <vector>

namespace megrt {

/// Row-major, for each b < batch:
///   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (+ bias broadcast over
///   rows), op(A) being m x k and op(B) k x n.
void gemmF32(const GemmParams &params, const float *a, const float *b, float *c,
             const float *bias);

/// A GEMM bound to its operands. bf16/f16 operands are widened to f32
/// scratch, multiplied with gemmF32, and C is rounded back (to nearest even).
class CpuGemm {
public:
  CpuGemm(const GemmParams &params, const void *a, const void *b, void *c,
          const void *bias);
  void run();

private:
  GemmParams params_;
  const void *a_;
  const void *b_;
  void *c_;
  const void *bias_;
  std::vector<float> scratchA_, scratchB_, scratchC_, scratchBias_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUGEMM_H
