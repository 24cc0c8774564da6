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
  CounterRandom random(seed, hashName(spec.name));
  double scale = spec.initScale;
  switch (spec.initKind) {
  case InitKind::Zeros:
    fillFloats(tensor, [](int64_t) { return 0.0; });
    return;
  case InitKind::Ones:
    fillFloats(tensor, [](int64_t) { return 1.0; });
    return;
  case InitKind::Normal:
    fillFloats(tensor, [&](int64_t i) { return scale * random.normal(i); });
    return;
  case InitKind::Uniform:
    fillFloats(tensor, [&](int64_t i) {
      return scale * (2.0 * random.uniform(i) - 1.0);
    });
    return;
  case InitKind::Copy:
    fail("parameter '", spec.name, "' is a copy of '", spec.initSource,
         "', filled from it rather than initialised");
  }
  fail("parameter '", spec.name, "': invalid init kind ",
       static_cast<int>(spec.initKind));
}

void copyParameter(Tensor &to, const Tensor &from) {
  std::vector<float> values = from.toFloats();
  fillFloats(to, [&](int64_t i) { return values[i]; });
}

} // namespace megrt
