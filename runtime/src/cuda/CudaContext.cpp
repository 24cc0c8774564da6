// One CUDA device as a Session uses it: its primary context and a stream.
#include "cuda/CudaContext.h"

#include "Fail.h"
#include "cuda/CudaDriver.h"

#include <mutex>
#include <set>

namespace megrt {
namespace {

/// Holds one reference to the device's primary context for the rest of the
/// process. cuBLASLt runs on the CUDA runtime, which keeps per-context state
/// (its loaded kernels) and expects the primary context to live as long as
/// the process, as it does in programs that use the runtime alone; without
/// this, the last Session's release would destroy the context under it.
void keepPrimaryContextAlive(CUdevice device, const std::string &where) {
  static std::mutex mutex;
  static std::set<CUdevice> kept;
  std::lock_guard<std::mutex> lock(mutex);
  if (kept.count(device))
    return;
  CUcontext context;
  checkCuda(cudaDriver().cuDevicePrimaryCtxRetain(&context, device),
            "cuDevicePrimaryCtxRetain", where);
  kept.insert(device);
}

} // namespace

CudaContext::CudaContext(int ordinal) {
  const CudaDriver &driver = cudaDriver();
  std::string where = concat("CUDA device ", ordinal);
  int count = 0;
  checkCuda(driver.cuDeviceGetCount(&count), "cuDeviceGetCount", where);
  if (ordinal >= count)
    fail("device 'cuda:", ordinal, "' does not exist: the CUDA driver sees ",
         count, count == 1 ? " device" : " devices",
         count > 0 ? concat(" (cuda:0 to cuda:", count - 1, ")") : "");
  checkCuda(driver.cuDeviceGet(&device_, ordinal), "cuDeviceGet", where);
  checkCuda(driver.cuDeviceGetAttribute(
                &computeMajor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                device_),
            "cuDeviceGetAttribute", where);
  checkCuda(driver.cuDeviceGetAttribute(
                &computeMinor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                device_),
            "cuDeviceGetAttribute", where);
  char name[256] = {};
  checkCuda(driver.cuDeviceGetName(name, sizeof(name) - 1, device_),
            "cuDeviceGetName", where);
  description_ = concat("cuda:", ordinal, " (", name, ", sm_", computeMajor_,
                        computeMinor_, ")");

  keepPrimaryContextAlive(device_, description_);
  checkCuda(driver.cuDevicePrimaryCtxRetain(&context_, device_),
            "cuDevicePrimaryCtxRetain", description_);
  try {
    makeCurrent();
    checkCuda(driver.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate", description_);
  } catch (...) {
    driver.cuDevicePrimaryCtxRelease(device_);
    throw;
  }
}

CudaContext::~CudaContext() {
  makeCurrentQuietly();
  synchronizeQuietly();
  const CudaDriver &driver = cudaDriver();
  driver.cuStreamDestroy(stream_);
  driver.cuDevicePrimaryCtxRelease(device_);
}

void CudaContext::makeCurrent() const {
  checkCuda(cudaDriver().cuCtxSetCurrent(context_), "cuCtxSetCurrent",
            description_);
}

void CudaContext::makeCurrentQuietly() const noexcept {
  cudaDriver().cuCtxSetCurrent(context_);
}

void CudaContext::synchronize(const std::string &what) const {
  checkCuda(cudaDriver().cuStreamSynchronize(stream_), "cuStreamSynchronize",
            what);
}

void CudaContext::synchronizeQuietly() const noexcept {
  cudaDriver().cuStreamSynchronize(stream_);
}

} // namespace megrt
