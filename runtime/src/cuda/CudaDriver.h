// The CUDA driver API, loaded with dlopen so that the runtime builds and
// runs on machines without a GPU.
#ifndef MEGRT_SRC_CUDA_CUDADRIVER_H
#define MEGRT_SRC_CUDA_CUDADRIVER_H

#include <cuda.h>

#include <string>

namespace megrt {

/// Pointers to the driver functions of CudaDriver.def, typed with their
/// <cuda.h> prototypes (of the versions cuda.h selects).
struct CudaDriver {
#define MEGRT_CUDA_FUNCTION(name) decltype(&::name) name = nullptr;
#include "cuda/CudaDriver.def"
#undef MEGRT_CUDA_FUNCTION
  /// As cuDriverGetVersion reports it: 1000 * major + 10 * minor.
  int version = 0;
};

/// Loads and initialises libcuda.so.1 on first use (thread-safe, once per
/// process). Throws megrt::Error when there is no driver, when it is older
/// than CUDA 12.0, or when cuInit fails.
const CudaDriver &cudaDriver();

/// "CUDA_ERROR_X (description)" for a driver result.
std::string cudaErrorText(CUresult result);

/// Throws "<object>: <call> failed: CUDA_ERROR_X (description)".
[[noreturn]] void failCuda(CUresult result, const char *call,
                           const std::string &object);

/// failCuda unless `result` is CUDA_SUCCESS.
inline void checkCuda(CUresult result, const char *call,
                      const std::string &object) {
  if (result != CUDA_SUCCESS)
    failCuda(result, call, object);
}

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDADRIVER_H
