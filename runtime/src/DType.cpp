// Element types of tensors and their sizes.
#include "megrt/DType.h"

#include "Fail.h"

namespace megrt {

size_t elementSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  }
  fail("invalid dtype value ", static_cast<int>(dtype));
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "<invalid dtype>";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType dtype :
       {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

bool isFloatingPoint(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

} // namespace megrt
