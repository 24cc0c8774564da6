// The artifact checksum: computed and written by whoever finishes an
// artifact (the compiler, the tests), checked by the loader.
#ifndef MEGRT_ARTIFACTSEAL_H
#define MEGRT_ARTIFACTSEAL_H

#include "megrt/Fnv1a.h"
#include "megrt/megc_generated.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace megrt {

/// Byte offset of Program.checksum in a finished artifact, or nullopt if the
/// field is absent. Only for buffers that passed FlatBuffers verification
/// (or that the caller just built).
inline std::optional<size_t> checksumOffset(const uint8_t *data) {
  flatbuffers::uoffset_t root = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data);
  const uint8_t *table = data + root;
  const uint8_t *vtable =
      table - flatbuffers::ReadScalar<flatbuffers::soffset_t>(table);
  auto vtableSize = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable);
  constexpr flatbuffers::voffset_t field = fb::Program::VT_CHECKSUM;
  if (field + sizeof(flatbuffers::voffset_t) > vtableSize)
    return std::nullopt;
  auto fieldOffset = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable + field);
  if (fieldOffset == 0)
    return std::nullopt;
  return static_cast<size_t>(table - data) + fieldOffset;
}

/// FNV-1a (64-bit) of `size` bytes, the 8 at `skip` read as zero.
inline uint64_t artifactChecksum(const uint8_t *data, size_t size,
                                 size_t skip) {
  const uint8_t zeros[8] = {};
  size_t begin = std::min(skip, size), end = std::min(skip + 8, size);
  uint64_t hash = fnv1a(data, begin);
  hash = fnv1a(zeros, end - begin, hash);
  return fnv1a(data + end, size - end, hash);
}

/// Writes the checksum of a finished artifact into its checksum field;
/// false if the field is absent (create it with a non-zero placeholder so
/// that FlatBuffers stores it).
inline bool sealArtifact(uint8_t *data, size_t size) {
  std::optional<size_t> offset = checksumOffset(data);
  if (!offset || *offset + 8 > size)
    return false;
  uint64_t checksum = artifactChecksum(data, size, *offset);
  for (int i = 0; i < 8; ++i)
    data[*offset + i] = static_cast<uint8_t>(checksum >> (8 * i));
  return true;
}

} // namespace megrt

#endif // MEGRT_ARTIFACTSEAL_H
