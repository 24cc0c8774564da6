// Checks a CPU module's ELF image before dlopen sees it.
#ifndef MEGRT_SRC_CPU_ELFCHECK_H
#define MEGRT_SRC_CPU_ELFCHECK_H

#include <cstddef>
#include <cstdint>

namespace megrt {

/// dlopen maps segments without comparing them with the file size, so a
/// truncated image would fault on first use instead of failing to load.
/// Requires a 64-bit little-endian ELF shared object for this machine whose
/// program headers and loadable segments lie inside the image.
void checkSharedObjectImage(const uint8_t *image, size_t size);

} // namespace megrt

#endif // MEGRT_SRC_CPU_ELFCHECK_H
