// cuBLASLt, loaded with dlopen like the driver, and the handle and
// workspace a Session's matrix products share.
#ifndef MEGRT_SRC_CUDA_CUBLASLT_H
#define MEGRT_SRC_CUDA_CUBLASLT_H

#include "cuda/DeviceMemory.h"

#include <cublasLt.h>

#include <string>

namespace megrt {

/// Pointers to the functions of CublasLt.def, typed with their prototypes.
struct CublasLtLibrary {
#define MEGRT_CUBLASLT_FUNCTION(name) decltype(&::name) name = nullptr;
#include "cuda/CublasLt.def"
#undef MEGRT_CUBLASLT_FUNCTION
};

/// Loads libcublasLt.so.<major of this build's cublasLt.h> on first use
/// (thread-safe, once per process): from the loader's search path, then
/// $CUDA_HOME/lib64, /usr/local/cuda/lib64 and /usr/local/cuda/lib. Throws
/// megrt::Error if it is missing or of another major version.
const CublasLtLibrary &cublasLt();

/// Throws "<object>: <call> failed: CUBLAS_STATUS_X (description)" unless
/// `status` is CUBLAS_STATUS_SUCCESS.
void checkCublas(cublasStatus_t status, const char *call,
                 const std::string &object);

/// A cuBLASLt handle and the device workspace of its matrix products; one
/// per Session, used in the Session's context (current when created).
class CublasLtContext {
public:
  /// Workspace offered to every matrix product; products run one at a
  /// time on the Session's stream, so they share it.
  static constexpr size_t kWorkspaceBytes = 32 << 20;

  explicit CublasLtContext(const std::string &device);
  ~CublasLtContext();
  CublasLtContext(const CublasLtContext &) = delete;
  CublasLtContext &operator=(const CublasLtContext &) = delete;

  cublasLtHandle_t handle() const { return handle_; }
  CUdeviceptr workspace() const { return workspace_.get(); }

private:
  DeviceMemory workspace_;
  cublasLtHandle_t handle_ = nullptr;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUBLASLT_H
