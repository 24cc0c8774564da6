// Owned, zero-initialised, 64-byte aligned bytes: tensor storage and arenas.
#include "megrt/AlignedBuffer.h"

#include "Fail.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace megrt {

namespace {
std::atomic<uint64_t> liveBytes{0}, peakBytes{0};

void allocated(uint64_t bytes) {
  uint64_t live = liveBytes.fetch_add(bytes) + bytes;
  uint64_t peak = peakBytes.load();
  while (live > peak && !peakBytes.compare_exchange_weak(peak, live)) {
  }
}
} // namespace

HostMemory hostMemory() { return {liveBytes.load(), peakBytes.load()}; }

void resetPeakHostMemory() { peakBytes.store(liveBytes.load()); }

AlignedBuffer::AlignedBuffer(size_t size) : AlignedBuffer(size, 0) {}

AlignedBuffer::AlignedBuffer(size_t size, size_t zeroFrom) : size_(size) {
  // Never empty, so data() is a valid pointer even for zero-sized tensors
  // (memcpy and kernels must not see nullptr).
  size_t rounded =
      (size + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  if (rounded < size)
    fail("cannot allocate ", size, " bytes: size overflows");
  if (rounded == 0)
    rounded = kBufferAlignment;
  void *ptr = std::aligned_alloc(kBufferAlignment, rounded);
  if (!ptr)
    fail("cannot allocate ", size, " bytes");
  std::memset(static_cast<uint8_t *>(ptr) + zeroFrom, 0, rounded - zeroFrom);
  data_ = std::unique_ptr<uint8_t, Free>(static_cast<uint8_t *>(ptr),
                                         Free{rounded});
  allocated(rounded);
}

AlignedBuffer::AlignedBuffer(const AlignedBuffer &other)
    : AlignedBuffer(other.size_, other.data_ ? other.size_ : 0) {
  if (other.data_)
    std::memcpy(data_.get(), other.data_.get(), size_);
}

AlignedBuffer &AlignedBuffer::operator=(const AlignedBuffer &other) {
  if (this != &other)
    *this = AlignedBuffer(other);
  return *this;
}

void AlignedBuffer::Free::operator()(uint8_t *ptr) const {
  std::free(ptr);
  liveBytes.fetch_sub(bytes);
}

} // namespace megrt
