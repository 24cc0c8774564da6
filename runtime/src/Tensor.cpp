// A dense, contiguous, row-major tensor that owns its bytes.
#include "megrt/Tensor.h"

#include "Fail.h"
#include "megrt/HalfFloat.h"

#include <cstring>

namespace megrt {

Tensor::Tensor() : Tensor(DType::F32, {}) {}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)),
      numElements_(megrt::numElements(shape_, "tensor")),
      storage_(byteSize(dtype_, shape_, "tensor")) {}

Tensor Tensor::fromBytes(DType dtype, Shape shape, const void *data,
                         size_t sizeBytes) {
  Tensor tensor(dtype, std::move(shape));
  if (sizeBytes != tensor.sizeBytes())
    fail("tensor ", formatType(dtype, tensor.shape()), ": expected ",
         tensor.sizeBytes(), " bytes of data, found ", sizeBytes);
  if (sizeBytes)
    std::memcpy(tensor.data(), data, sizeBytes);
  return tensor;
}

namespace {
template <typename T>
void checkValueCount(DType dtype, const Shape &shape,
                     const std::vector<T> &values, int64_t expected) {
  if (static_cast<int64_t>(values.size()) != expected)
    fail("tensor ", formatType(dtype, shape), ": expected ", expected,
         " values, found ", values.size());
}
} // namespace

Tensor Tensor::fromFloats(DType dtype, Shape shape,
                          const std::vector<float> &values) {
  Tensor tensor(dtype, std::move(shape));
  checkValueCount(dtype, tensor.shape(), values, tensor.numElements());
  switch (dtype) {
  case DType::F32:
    std::memcpy(tensor.data(), values.data(), tensor.sizeBytes());
    break;
  case DType::BF16:
  case DType::F16: {
    uint16_t *out = tensor.dataAs<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i)
      out[i] =
          dtype == DType::BF16 ? floatToBf16(values[i]) : floatToF16(values[i]);
    break;
  }
  case DType::I32:
  case DType::I64:
    fail("Tensor::fromFloats: expected a floating-point dtype, found ",
         dtypeName(dtype));
  }
  return tensor;
}

Tensor Tensor::fromInt32(Shape shape, const std::vector<int32_t> &values) {
  Tensor tensor(DType::I32, std::move(shape));
  checkValueCount(DType::I32, tensor.shape(), values, tensor.numElements());
  std::memcpy(tensor.data(), values.data(), tensor.sizeBytes());
  return tensor;
}

Tensor Tensor::fromInt64(Shape shape, const std::vector<int64_t> &values) {
  Tensor tensor(DType::I64, std::move(shape));
  checkValueCount(DType::I64, tensor.shape(), values, tensor.numElements());
  std::memcpy(tensor.data(), values.data(), tensor.sizeBytes());
  return tensor;
}

std::vector<float> Tensor::toFloats() const {
  std::vector<float> values(static_cast<size_t>(numElements_));
  auto convert = [&](const auto *elements, auto toFloat) {
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = toFloat(elements[i]);
  };
  auto byValue = [](auto element) { return static_cast<float>(element); };
  switch (dtype_) {
  case DType::F32:
    convert(dataAs<float>(), byValue);
    break;
  case DType::BF16:
    convert(dataAs<uint16_t>(), bf16ToFloat);
    break;
  case DType::F16:
    convert(dataAs<uint16_t>(), f16ToFloat);
    break;
  case DType::I32:
    convert(dataAs<int32_t>(), byValue);
    break;
  case DType::I64:
    convert(dataAs<int64_t>(), byValue);
    break;
  }
  return values;
}

bool Tensor::operator==(const Tensor &other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         std::memcmp(data(), other.data(), sizeBytes()) == 0;
}

void Tensor::checkAccess(bool matches, const char *typeName) const {
  if (!matches)
    fail("tensor ", formatType(dtype_, shape_), ": elements are not stored as ",
         typeName);
}

} // namespace megrt
