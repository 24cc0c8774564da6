// Checks a CUDA module's cubin before the driver, which is given no size,
// reads it.
#ifndef MEGRT_SRC_CUDA_CUBINCHECK_H
#define MEGRT_SRC_CUDA_CUBINCHECK_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace megrt {

/// cuModuleLoadData finds the extent of an image from its own headers, so a
/// truncated one would be read past its end. Requires a CUDA ELF image whose
/// section and program headers and their contents lie inside `size` bytes,
/// or a fatbin whose header and payload do. `what` prefixes errors.
void checkCubinImage(const uint8_t *image, size_t size,
                     const std::string &what);

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUBINCHECK_H
