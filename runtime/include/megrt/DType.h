// Element types of tensors and their sizes.
#ifndef MEGRT_DTYPE_H
#define MEGRT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace megrt {

/// Values equal those of megrt.fb.DType in the artifact schema.
enum class DType : uint8_t { F32 = 0, BF16 = 1, F16 = 2, I32 = 3, I64 = 4 };

/// Bytes per element.
size_t elementSize(DType dtype);

/// Lower-case name as used in the schema and in messages: "f32", "bf16", ...
const char *dtypeName(DType dtype);

/// Inverse of dtypeName; nullopt for an unknown name.
std::optional<DType> parseDType(std::string_view name);

bool isFloatingPoint(DType dtype);

} // namespace megrt

#endif // MEGRT_DTYPE_H
