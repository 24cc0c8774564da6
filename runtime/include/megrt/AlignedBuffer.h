// Owned, zero-initialised, 64-byte aligned bytes: tensor storage and arenas.
#ifndef MEGRT_ALIGNEDBUFFER_H
#define MEGRT_ALIGNEDBUFFER_H

#include <cstddef>
#include <cstdint>
#include <memory>

namespace megrt {

/// 64 bytes is a cache line and the widest vector register, so compiled
/// kernels may use aligned vector loads on any buffer that starts here.
constexpr size_t kBufferAlignment = 64;

class AlignedBuffer {
public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size);

  AlignedBuffer(const AlignedBuffer &other);
  AlignedBuffer &operator=(const AlignedBuffer &other);
  AlignedBuffer(AlignedBuffer &&) noexcept = default;
  AlignedBuffer &operator=(AlignedBuffer &&) noexcept = default;

  uint8_t *data() { return data_.get(); }
  const uint8_t *data() const { return data_.get(); }
  size_t size() const { return size_; }

private:
  /// Allocates `size` bytes and zeroes only those from `zeroFrom` to the
  /// end of the allocation: a copy overwrites the rest at once.
  AlignedBuffer(size_t size, size_t zeroFrom);

  /// Frees and uncounts the `bytes` it was allocated with.
  struct Free {
    Free() noexcept : bytes(0) {}
    explicit Free(size_t bytes) noexcept : bytes(bytes) {}
    void operator()(uint8_t *ptr) const;
    size_t bytes;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

/// The bytes of every AlignedBuffer alive in the process (tensors, arenas,
/// kernel scratch: the memory megrt allocates on the host), and the most
/// that were alive at once since the last resetPeakHostMemory().
struct HostMemory {
  uint64_t live = 0;
  uint64_t peak = 0;
};
HostMemory hostMemory();
/// Starts a new peak from what is alive now.
void resetPeakHostMemory();

} // namespace megrt

#endif // MEGRT_ALIGNEDBUFFER_H
