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
  struct Free {
    void operator()(uint8_t *ptr) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

} // namespace megrt

#endif // MEGRT_ALIGNEDBUFFER_H
