// The parameters of a Gemm command, shared by the CPU and CUDA backends.
#ifndef MEGRT_SRC_GEMMPARAMS_H
#define MEGRT_SRC_GEMMPARAMS_H

#include "FbTypes.h"
#include "megrt/DType.h"
#include "megrt/megc_generated.h"

#include <cstdint>

namespace megrt {

/// The schema's Gemm without its operands. Verification guarantees every
/// operand spans (batch - 1) * stride + rows * cols elements.
struct GemmParams {
  int64_t m, n, k, batch;
  int64_t strideA, strideB, strideC;
  bool transA, transB;
  float alpha, beta;
  DType dtype;
  /// tanh-approximated GELU on C after the bias.
  bool geluEpilogue = false;
};

inline GemmParams toGemmParams(const fb::Gemm &gemm) {
  return {gemm.m(),        gemm.n(),        gemm.k(),
          gemm.batch(),    gemm.stride_a(), gemm.stride_b(),
          gemm.stride_c(), gemm.trans_a(),  gemm.trans_b(),
          gemm.alpha(),    gemm.beta(),     toDType(gemm.dtype()),
          gemm.epilogue() == fb::GemmEpilogue::gelu_tanh};
}

} // namespace megrt

#endif // MEGRT_SRC_GEMMPARAMS_H
