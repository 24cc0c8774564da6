// The CUDA kernels of a program: its PTX or cubin loaded into a context.
#ifndef MEGRT_SRC_CUDA_CUDAMODULE_H
#define MEGRT_SRC_CUDA_CUDAMODULE_H

#include "cuda/CudaContext.h"
#include "megrt/megc_generated.h"

#include <cuda.h>

#include <vector>

namespace megrt {

class CudaModule {
public:
  /// Loads program.cuda into the current context: the cubin when it was
  /// built for this device's architecture, else the PTX, JIT-compiled. Then
  /// resolves the entry of every kernel's every CUDA launch.
  CudaModule(const fb::Program &program, const CudaContext &context);
  ~CudaModule();
  CudaModule(const CudaModule &) = delete;
  CudaModule &operator=(const CudaModule &) = delete;

  /// The function of Program.kernels[kernel].cuda.dispatches[launch].
  CUfunction function(uint32_t kernel, uint32_t launch) const {
    return functions_[kernel][launch];
  }

private:
  void load(const fb::CudaModule &module, const CudaContext &context);
  void resolve(const fb::Program &program);

  CUmodule module_ = nullptr;
  std::vector<std::vector<CUfunction>> functions_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAMODULE_H
