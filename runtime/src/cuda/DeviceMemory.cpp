// An owned allocation of device memory.
#include "cuda/DeviceMemory.h"

#include "Fail.h"
#include "cuda/CudaDriver.h"

#include <utility>

namespace megrt {

DeviceMemory::DeviceMemory(size_t bytes, const std::string &what)
    : size_(bytes) {
  if (bytes == 0)
    return;
  checkCuda(cudaDriver().cuMemAlloc(&address_, bytes), "cuMemAlloc",
            concat(what, " (", bytes, " bytes)"));
}

DeviceMemory::~DeviceMemory() {
  // Nothing can be reported from a destructor; a failure here means the
  // context is already broken, and the run that broke it has reported why.
  if (address_)
    cudaDriver().cuMemFree(address_);
}

DeviceMemory::DeviceMemory(DeviceMemory &&other) noexcept
    : address_(std::exchange(other.address_, 0)),
      size_(std::exchange(other.size_, 0)) {}

DeviceMemory &DeviceMemory::operator=(DeviceMemory &&other) noexcept {
  if (this != &other) {
    DeviceMemory old(std::move(*this));
    address_ = std::exchange(other.address_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

} // namespace megrt
