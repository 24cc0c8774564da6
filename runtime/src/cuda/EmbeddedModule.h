// A module of the runtime's own CUDA kernels (a fatbin that nvcc made and
// the build embedded, see cmake/CudaKernels.cmake) loaded into a context.
#ifndef MEGRT_SRC_CUDA_EMBEDDEDMODULE_H
#define MEGRT_SRC_CUDA_EMBEDDEDMODULE_H

#include "cuda/CudaContext.h"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace megrt {

class EmbeddedModule {
public:
  /// Checks `image` (size bytes) and loads it into `context`, which is made
  /// current and must outlive this object; `what` names the module in
  /// errors, with the JIT's log where the driver gives one.
  EmbeddedModule(const CudaContext &context, const uint8_t *image, size_t size,
                 std::string what);
  ~EmbeddedModule();
  EmbeddedModule(const EmbeddedModule &) = delete;
  EmbeddedModule &operator=(const EmbeddedModule &) = delete;

  /// The kernel `name`, opted in to `sharedBytes` of dynamic shared memory
  /// where that is above the default limit.
  CUfunction function(const std::string &name, unsigned sharedBytes = 0) const;

  const std::string &what() const { return what_; }

private:
  const CudaContext &context_;
  std::string what_;
  CUmodule module_ = nullptr;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_EMBEDDEDMODULE_H
