// FNV-1a (64-bit), the one hash megrt uses for names and contents: the
// artifact checksum, parameter-name streams and file identities.
#ifndef MEGRT_FNV1A_H
#define MEGRT_FNV1A_H

#include <cstddef>
#include <cstdint>

namespace megrt {

constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

/// The hash of `size` bytes, continuing from `hash` (the basis to start).
inline uint64_t fnv1a(const void *data, size_t size,
                      uint64_t hash = kFnv1aBasis) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

} // namespace megrt

#endif // MEGRT_FNV1A_H
