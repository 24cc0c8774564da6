// GEMM on the CPU through the BLAS, split into blocks that the device's
// threads run, with f32 scratch for 16-bit dtypes.
#ifndef MEGRT_SRC_CPU_CPUGEMM_H
#define MEGRT_SRC_CPU_CPUGEMM_H

#include "GemmParams.h"

#include <cstdint>
#include <vector>

namespace megrt {

class ThreadPool;

/// A part of a GEMM: rows [row, row + rows) and columns [col, col + cols) of
/// C in batch `batch`.
struct GemmBlock {
  int64_t batch, row, rows, col, cols;
};

/// The blocks a GEMM is split into. They depend on the shape only, never on
/// the number of threads: every element of C is computed by the same BLAS
/// call, with the same summation order, however many threads run them.
std::vector<GemmBlock> gemmBlocks(const GemmParams &params);

/// Row-major, for one block of each b < batch:
///   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (+ bias broadcast over
///   rows), op(A) being m x k and op(B) k x n; then the GELU epilogue.
void gemmF32(const GemmParams &params, const GemmBlock &block, const float *a,
             const float *b, float *c, const float *bias);

/// A GEMM bound to its operands. bf16/f16 operands are widened to f32
/// scratch, multiplied with gemmF32, and C is rounded back (to nearest even).
class CpuGemm {
public:
  CpuGemm(const GemmParams &params, const void *a, const void *b, void *c,
          const void *bias);
  void run(ThreadPool &pool);

private:
  GemmParams params_;
  std::vector<GemmBlock> blocks_;
  const void *a_;
  const void *b_;
  void *c_;
  const void *bias_;
  std::vector<float> scratchA_, scratchB_, scratchC_, scratchBias_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUGEMM_H
