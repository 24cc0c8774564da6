// GEMM on a CUDA device through cuBLASLt.
#ifndef MEGRT_SRC_CUDA_CUDAGEMM_H
#define MEGRT_SRC_CUDA_CUDAGEMM_H

#include "GemmParams.h"
#include "cuda/CublasLt.h"

#include <cuda.h>

#include <memory>
#include <string>

namespace megrt {

/// A GEMM bound to its device operands, with its cuBLASLt descriptors and
/// algorithm chosen once. Row-major, for each b < batch:
///   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (+ bias broadcast over
///   rows), op(A) being m x k and op(B) k x n.
/// f32 is computed in f32 (no TF32), bf16/f16 with f32 accumulation.
class CudaGemm {
public:
  /// `bias` 0 means no bias. `where` names the command in errors.
  CudaGemm(const GemmParams &params, CUdeviceptr a, CUdeviceptr b,
           CUdeviceptr c, CUdeviceptr bias, const CublasLtContext &cublas,
           std::string where);

  /// Enqueues the product on `stream`.
  void run(CUstream stream) const;

private:
  struct DestroyDesc {
    void operator()(cublasLtMatmulDescOpaque_t *desc) const;
  };
  struct DestroyLayout {
    void operator()(cublasLtMatrixLayoutOpaque_t *layout) const;
  };
  using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DestroyDesc>;
  using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DestroyLayout>;

  Layout layout(cudaDataType type, int64_t rows, int64_t cols, int64_t batch,
                int64_t stride, const char *role) const;
  void chooseAlgorithm();

  GemmParams params_;
  CUdeviceptr a_, b_, c_, bias_;
  const CublasLtContext &cublas_;
  std::string where_;
  MatmulDesc desc_;
  // cuBLASLt is column-major: it computes C^T = op(B)^T op(A)^T, so its "A"
  // operand is our B and its "B" operand our A.
  Layout layoutA_, layoutB_, layoutC_;
  cublasLtMatmulAlgo_t algorithm_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAGEMM_H
