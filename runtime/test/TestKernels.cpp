// Kernels with the megrt CPU ABI, built into shared objects that tests embed
// in artifacts.
#ifndef MEGRT_TEST_INCREMENT
#error "define MEGRT_TEST_INCREMENT"
#endif

#include <cmath>

extern "C" {

/// args: in f32[8], out f32[8].
void add_constant(void **args) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int i = 0; i < 8; ++i)
    out[i] = in[i] + MEGRT_TEST_INCREMENT;
}

/// args: a f32[8], b f32[8], out f32[8].
void multiply(void **args) {
  const float *a = static_cast<const float *>(args[0]);
  const float *b = static_cast<const float *>(args[1]);
  float *out = static_cast<float *>(args[2]);
  for (int i = 0; i < 8; ++i)
    out[i] = a[i] * b[i];
}

/// args: in f32[8], out f32[8]. Calls into libm, so the object has a
/// DT_NEEDED entry for it, as compiled kernels with math calls do.
void exponential(void **args) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int i = 0; i < 8; ++i)
    out[i] = std::exp(in[i]);
}
}
