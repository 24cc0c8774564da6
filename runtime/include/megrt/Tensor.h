// A dense, contiguous, row-major tensor that owns its bytes.
#ifndef MEGRT_TENSOR_H
#define MEGRT_TENSOR_H

#include "megrt/AlignedBuffer.h"
#include "megrt/DType.h"
#include "megrt/Shape.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace megrt {

/// The C++ element type that views each dtype's storage; uint16_t holds the
/// raw bits of bf16 and f16.
template <typename T> constexpr bool storesElementsOf(DType dtype) {
  if constexpr (std::is_same_v<T, float>)
    return dtype == DType::F32;
  else if constexpr (std::is_same_v<T, int32_t>)
    return dtype == DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return dtype == DType::I64;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return dtype == DType::BF16 || dtype == DType::F16;
  else
    static_assert(!sizeof(T), "no megrt dtype is stored as this type");
}

template <typename T> constexpr const char *elementTypeName() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, int32_t>)
    return "int32_t";
  else if constexpr (std::is_same_v<T, int64_t>)
    return "int64_t";
  else
    return "uint16_t";
}

class Tensor {
public:
  /// An f32 scalar holding 0.
  Tensor();
  /// Zero-filled.
  Tensor(DType dtype, Shape shape);

  /// Copies `sizeBytes` bytes, which must equal the size of dtype x shape.
  static Tensor fromBytes(DType dtype, Shape shape, const void *data,
                          size_t sizeBytes);
  /// Rounds each value to `dtype`, which must be a floating-point dtype.
  static Tensor fromFloats(DType dtype, Shape shape,
                           const std::vector<float> &values);
  static Tensor fromInt32(Shape shape, const std::vector<int32_t> &values);
  static Tensor fromInt64(Shape shape, const std::vector<int64_t> &values);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t numElements() const { return numElements_; }
  size_t sizeBytes() const { return storage_.size(); }

  uint8_t *data() { return storage_.data(); }
  const uint8_t *data() const { return storage_.data(); }

  /// Typed access; throws megrt::Error if T does not store this dtype.
  template <typename T> T *dataAs() {
    checkAccess(storesElementsOf<T>(dtype_), elementTypeName<T>());
    return reinterpret_cast<T *>(data());
  }
  template <typename T> const T *dataAs() const {
    checkAccess(storesElementsOf<T>(dtype_), elementTypeName<T>());
    return reinterpret_cast<const T *>(data());
  }

  /// Every element converted to f32 (integers convert by value).
  std::vector<float> toFloats() const;

  /// Same dtype, shape and bytes.
  bool operator==(const Tensor &other) const;
  bool operator!=(const Tensor &other) const { return !(*this == other); }

private:
  void checkAccess(bool matches, const char *typeName) const;

  DType dtype_;
  Shape shape_;
  int64_t numElements_;
  AlignedBuffer storage_;
};

} // namespace megrt

#endif // MEGRT_TENSOR_H
