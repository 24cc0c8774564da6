// Fills a parameter tensor from its init spec.
#include "ParameterInit.h"

#include "CounterRandom.h"
#include "Fail.h"
#include "cpu/ThreadPool.h"
#include "megrt/HalfFloat.h"

#include <algorithm>

namespace megrt {
namespace {
/// Elements [begin, end) of `tensor`: generate(i) converted to its dtype.
template <typename Generate>
void fillRange(Tensor &tensor, const Generate &generate, int64_t begin,
               int64_t end) {
  switch (tensor.dtype()) {
  case DType::F32: {
    float *out = tensor.dataAs<float>();
    for (int64_t i = begin; i < end; ++i)
      out[i] = static_cast<float>(generate(i));
    return;
  }
  case DType::BF16:
  case DType::F16: {
    uint16_t *out = tensor.dataAs<uint16_t>();
    bool bf16 = tensor.dtype() == DType::BF16;
    for (int64_t i = begin; i < end; ++i) {
      float value = static_cast<float>(generate(i));
      out[i] = bf16 ? floatToBf16(value) : floatToF16(value);
    }
    return;
  }
  case DType::I32: {
    int32_t *out = tensor.dataAs<int32_t>();
    for (int64_t i = begin; i < end; ++i)
      out[i] = static_cast<int32_t>(generate(i));
    return;
  }
  case DType::I64: {
    int64_t *out = tensor.dataAs<int64_t>();
    for (int64_t i = begin; i < end; ++i)
      out[i] = static_cast<int64_t>(generate(i));
    return;
  }
  }
}

/// Every element of `tensor`, in chunks on the pool's threads when there
/// is one: each element is a function of its index alone.
template <typename Generate>
void fillFloats(Tensor &tensor, const Generate &generate,
                ThreadPool *pool = nullptr) {
  constexpr int64_t kChunk = int64_t(1) << 16;
  int64_t count = tensor.numElements();
  int64_t chunks = (count + kChunk - 1) / kChunk;
  if (!pool || chunks < 2) {
    fillRange(tensor, generate, 0, count);
    return;
  }
  pool->parallelFor(static_cast<uint32_t>(chunks), [&](uint32_t chunk) {
    int64_t begin = chunk * kChunk;
    fillRange(tensor, generate, begin, std::min(count, begin + kChunk));
  });
}
} // namespace

void initializeParameter(Tensor &tensor, const ParameterSpec &spec,
                         uint64_t seed, ThreadPool *pool) {
  initializeParameterPiece(tensor, spec, seed, 0, tensor.numElements(), pool);
}

namespace {
/// Fills `tensor` with the values that element `wholeIndex(i)` of the whole
/// parameter would get (negative: padding, zero).
template <typename WholeIndex>
void initializeFrom(Tensor &tensor, const ParameterSpec &spec, uint64_t seed,
                    ThreadPool *pool, WholeIndex wholeIndex) {
  CounterRandom random(seed, hashName(spec.name));
  double scale = spec.initScale;
  auto piece = [&](auto value) {
    fillFloats(
        tensor,
        [&](int64_t i) {
          int64_t index = wholeIndex(i);
          return index >= 0 ? value(index) : 0.0;
        },
        pool);
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
                              int64_t totalElements, ThreadPool *pool) {
  // Element i of the piece is element first + i of the whole; padding is 0.
  initializeFrom(tensor, spec, seed, pool, [&](int64_t i) {
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
                                     int64_t first, ThreadPool *pool) {
  int64_t extent = fullShape[dim] / blocks;
  int64_t blockElements = 1;
  for (size_t d = 0; d < fullShape.size(); ++d)
    blockElements *= static_cast<int>(d) == dim ? extent : fullShape[d];
  initializeFrom(tensor, spec, seed, pool, [&](int64_t i) -> int64_t {
    int64_t at = first + i;
    return at < blockElements
               ? blockElementIndex(fullShape, dim, extent, index, at)
               : -1;
  });
}

void initializeParameterBlock(Tensor &tensor, const ParameterSpec &spec,
                              uint64_t seed, const Shape &fullShape, int dim,
                              int64_t index, ThreadPool *pool) {
  int64_t extent = tensor.shape()[dim];
  initializeFrom(tensor, spec, seed, pool, [&](int64_t i) {
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
