// Fills a parameter tensor from its init spec.
#include "ParameterInit.h"

#include "CounterRandom.h"
#include "Fail.h"
#include "megrt/HalfFloat.h"

namespace megrt {
namespace {
template <typename Generate>
void fillFloats(Tensor &tensor, const Generate &generate) {
  int64_t count = tensor.numElements();
  switch (tensor.dtype()) {
  case DType::F32: {
    float *out = tensor.dataAs<float>();
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(generate(i));
    return;
  }
  case DType::BF16:
  case DType::F16: {
    uint16_t *out = tensor.dataAs<uint16_t>();
    bool bf16 = tensor.dtype() == DType::BF16;
    for (int64_t i = 0; i < count; ++i) {
      float value = static_cast<float>(generate(i));
      out[i] = bf16 ? floatToBf16(value) : floatToF16(value);
    }
    return;
  }
  case DType::I32: {
    int32_t *out = tensor.dataAs<int32_t>();
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<int32_t>(generate(i));
    return;
  }
  case DType::I64: {
    int64_t *out = tensor.dataAs<int64_t>();
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<int64_t>(generate(i));
    return;
  }
  }
}
} // namespace

void initializeParameter(Tensor &tensor, const ParameterSpec &spec,
                         uint64_t seed) {
  initializeParameterPiece(tensor, spec, seed, 0, tensor.numElements());
}

namespace {
/// Fills `tensor` with the values that element `wholeIndex(i)` of the whole
/// parameter would get (negative: padding, zero).
template <typename WholeIndex>
void initializeFrom(Tensor &tensor, const ParameterSpec &spec, uint64_t seed,
                    WholeIndex wholeIndex) {
  CounterRandom random(seed, hashName(spec.name));
  double scale = spec.initScale;
  auto piece = [&](auto value) {
    fillFloats(tensor, [&](int64_t i) {
      int64_t index = wholeIndex(i);
      return index >= 0 ? value(index) : 0.0;
    });
  };
  switch (spec.initKind) {
  case InitKind::Zeros:
    piece([](int64_t) { return 0.0; });
    return;
  case InitKind::Ones:
    piece([](int64_t) { return 1.0; });
    return;
  case InitKind::Normal:
    piece([&](int64_t i) { return scale * random.normal(i); });
    return;
  case InitKind::Uniform:
    piece([&](int64_t i) { return scale * (2.0 * random.uniform(i) - 1.0); });
    return;
  case InitKind::Copy:
    fail("parameter '", spec.name, "' is a copy of '", spec.initSource,
         "', filled from it rather than initialised");
  }
  fail("parameter '", spec.name, "': invalid init kind ",
       static_cast<int>(spec.initKind));
}
} // namespace

void initializeParameterPiece(Tensor &tensor, const ParameterSpec &spec,
                              uint64_t seed, int64_t first,
                              int64_t totalElements) {
  // Element i of the piece is element first + i of the whole; padding is 0.
  initializeFrom(tensor, spec, seed, [&](int64_t i) {
    int64_t index = first + i;
    return index < totalElements ? index : -1;
  });
}

int64_t blockElementIndex(const Shape &fullShape, int dim, int64_t blockExtent,
                          int64_t index, int64_t i) {
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < fullShape.size(); ++d)
    inner *= fullShape[d];
  int64_t blockRow = blockExtent * inner;
  int64_t outer = i / blockRow, within = i % blockRow;
  return outer * fullShape[dim] * inner + index * blockRow + within;
}

void initializeParameterPieceOfBlock(Tensor &tensor, const ParameterSpec &spec,
                                     uint64_t seed, const Shape &fullShape,
                                     int dim, int64_t blocks, int64_t index,
                                     int64_t first) {
  int64_t extent = fullShape[dim] / blocks;
  int64_t blockElements = 1;
  for (size_t d = 0; d < fullShape.size(); ++d)
    blockElements *= static_cast<int>(d) == dim ? extent : fullShape[d];
  initializeFrom(tensor, spec, seed, [&](int64_t i) -> int64_t {
    int64_t at = first + i;
    return at < blockElements
               ? blockElementIndex(fullShape, dim, extent, index, at)
               : -1;
  });
}

void initializeParameterBlock(Tensor &tensor, const ParameterSpec &spec,
                              uint64_t seed, const Shape &fullShape, int dim,
                              int64_t index) {
  int64_t extent = tensor.shape()[dim];
  initializeFrom(tensor, spec, seed, [&](int64_t i) {
    return blockElementIndex(fullShape, dim, extent, index, i);
  });
}

void copyParameter(Tensor &to, const Tensor &from) {
  copyParameterPiece(to, from, 0);
}

void copyParameterPiece(Tensor &to, const Tensor &from, int64_t first) {
  std::vector<float> values = from.toFloats();
  auto total = static_cast<int64_t>(values.size());
  fillFloats(to, [&](int64_t i) {
    return first + i < total ? static_cast<double>(values[first + i]) : 0.0;
  });
}

} // namespace megrt
