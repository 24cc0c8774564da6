// An owned allocation of device memory.
#ifndef MEGRT_SRC_CUDA_DEVICEMEMORY_H
#define MEGRT_SRC_CUDA_DEVICEMEMORY_H

#include <cuda.h>

#include <cstddef>
#include <string>

namespace megrt {

/// cuMemAlloc'd bytes, freed on destruction. The context they were allocated
/// in must be current when they are allocated and freed.
class DeviceMemory {
public:
  DeviceMemory() = default;
  /// Allocates `bytes`; 0 bytes allocates nothing and get() is 0. `what`
  /// names the allocation in the error if it fails.
  DeviceMemory(size_t bytes, const std::string &what);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory &&other) noexcept;
  DeviceMemory &operator=(DeviceMemory &&other) noexcept;
  DeviceMemory(const DeviceMemory &) = delete;
  DeviceMemory &operator=(const DeviceMemory &) = delete;

  CUdeviceptr get() const { return address_; }
  size_t size() const { return size_; }

private:
  CUdeviceptr address_ = 0;
  size_t size_ = 0;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_DEVICEMEMORY_H
