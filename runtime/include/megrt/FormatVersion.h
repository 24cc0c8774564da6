// The artifact format version this runtime reads.
#ifndef MEGRT_FORMATVERSION_H
#define MEGRT_FORMATVERSION_H

#include <cstdint>

namespace megrt {

/// Written by the compiler into Program.format_version; bumped on any change
/// that an older runtime would misread.
constexpr uint32_t kFormatVersion = 14;

/// FlatBuffers file identifier of a megc artifact.
constexpr const char *kFileIdentifier = "MEGC";

} // namespace megrt

#endif // MEGRT_FORMATVERSION_H
