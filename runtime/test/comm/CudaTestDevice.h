// A CUDA device for the communicator tests: its primary context made
// current, a stream, and device copies of host vectors; and the one-line
// reason to skip when there is no driver or too few devices.
#ifndef MEGRT_TEST_COMM_CUDATESTDEVICE_H
#define MEGRT_TEST_COMM_CUDATESTDEVICE_H

#include "cuda/CudaDriver.h"
#include "megrt/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace megrt::test {

/// The driver's load error, or nullopt when a driver is present.
inline std::optional<std::string> cudaDriverError() {
  try {
    cudaDriver();
    return std::nullopt;
  } catch (const Error &error) {
    return std::string(error.what());
  }
}

/// Why a test needing `devices` CUDA devices cannot run here, or nullopt.
inline std::optional<std::string> cudaUnavailable(int devices) {
  if (std::optional<std::string> error = cudaDriverError())
    return "no CUDA driver: " + *error;
  int count = 0;
  if (cudaDriver().cuDeviceGetCount(&count) != CUDA_SUCCESS || count < devices)
    return "needs " + std::to_string(devices) + " CUDA device(s), found " +
           std::to_string(count);
  return std::nullopt;
}

class CudaTestDevice {
public:
  explicit CudaTestDevice(int ordinal) {
    const CudaDriver &driver = cudaDriver();
    checkCuda(driver.cuDeviceGet(&device_, ordinal), "cuDeviceGet", "test");
    checkCuda(driver.cuDevicePrimaryCtxRetain(&context_, device_),
              "cuDevicePrimaryCtxRetain", "test");
    checkCuda(driver.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "test");
    checkCuda(driver.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate", "test");
  }
  ~CudaTestDevice() {
    const CudaDriver &driver = cudaDriver();
    for (CUdeviceptr buffer : buffers_)
      driver.cuMemFree(buffer);
    driver.cuStreamDestroy(stream_);
    driver.cuDevicePrimaryCtxRelease(device_);
  }
  CudaTestDevice(const CudaTestDevice &) = delete;
  CudaTestDevice &operator=(const CudaTestDevice &) = delete;

  CUstream stream() const { return stream_; }

  /// A device buffer freed with the device.
  template <typename T> T *allocate(size_t count) {
    CUdeviceptr buffer = 0;
    checkCuda(cudaDriver().cuMemAlloc(&buffer, count * sizeof(T)), "cuMemAlloc",
              "test");
    buffers_.push_back(buffer);
    return reinterpret_cast<T *>(buffer);
  }

  template <typename T> T *upload(const std::vector<T> &values) {
    T *buffer = allocate<T>(values.size());
    checkCuda(cudaDriver().cuMemcpyHtoDAsync(
                  reinterpret_cast<CUdeviceptr>(buffer), values.data(),
                  values.size() * sizeof(T), stream_),
              "cuMemcpyHtoDAsync", "test");
    return buffer;
  }

  /// Copies back after the stream's work (the collectives) is done.
  template <typename T> std::vector<T> download(const T *buffer, size_t count) {
    std::vector<T> values(count);
    checkCuda(cudaDriver().cuMemcpyDtoHAsync(
                  values.data(), reinterpret_cast<CUdeviceptr>(buffer),
                  count * sizeof(T), stream_),
              "cuMemcpyDtoHAsync", "test");
    checkCuda(cudaDriver().cuStreamSynchronize(stream_), "cuStreamSynchronize",
              "test");
    return values;
  }

private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> buffers_;
};

} // namespace megrt::test

#endif // MEGRT_TEST_COMM_CUDATESTDEVICE_H
