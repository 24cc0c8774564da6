// The embedding_grad library kernel on a CUDA device: the kernels of
// cuda/embedding/EmbeddingGrad.cu, embedded in the runtime as a fatbin,
// loaded into a context and launched through the driver API.
#ifndef MEGRT_SRC_CUDA_CUDAEMBEDDINGGRAD_H
#define MEGRT_SRC_CUDA_CUDAEMBEDDINGGRAD_H

#include "cuda/CudaContext.h"
#include "cuda/CudaLibrary.h"
#include "cuda/EmbeddedModule.h"
#include "library/EmbeddingGrad.h"

#include <cuda.h>

#include <map>
#include <memory>
#include <string>

namespace megrt {

/// The embedding-gradient kernels loaded into one context.
class CudaEmbeddingGrad : public CudaLibraryKernel {
public:
  /// Loads the embedded module into `context` (which must outlive this
  /// object). Fails in a runtime built without nvcc and on devices older
  /// than compute capability 9.0.
  explicit CudaEmbeddingGrad(const CudaContext &context);
  ~CudaEmbeddingGrad() override;
  CudaEmbeddingGrad(const CudaEmbeddingGrad &) = delete;
  CudaEmbeddingGrad &operator=(const CudaEmbeddingGrad &) = delete;

  CudaLibraryRun prepare(const LibraryCallInfo &call,
                         const std::vector<CUdeviceptr> &operands,
                         CUdeviceptr scratch) const override;

  /// Enqueues embedding_grad's semantics (megrt/LibraryKernels.def) on
  /// `stream`: table from grad and ids, with the i32 first row at
  /// `firstRow` (0: none); `scratch` holds embeddingGradScratch(shape) i32,
  /// 4-byte aligned, unused by other work until the launches finish.
  void run(const EmbeddingGradShape &shape, CUdeviceptr grad, CUdeviceptr ids,
           CUdeviceptr firstRow, CUdeviceptr table, CUdeviceptr scratch,
           CUstream stream) const;

private:
  const CudaContext &context_;
  std::unique_ptr<EmbeddedModule> module_;
  std::map<std::string, CUfunction> functions_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAEMBEDDINGGRAD_H
