// Dispatch entries with the megrt CPU ABI (void f(void **args, uint32_t
// workgroup, uint32_t count)), built into shared objects that tests embed in
// artifacts.
#ifndef MEGRT_TEST_INCREMENT
#error "define MEGRT_TEST_INCREMENT"
#endif

#include <cmath>
#include <cstdint>

extern "C" {

/// args: in f32[8], out f32[8].
void add_constant(void **args, uint32_t, uint32_t) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int i = 0; i < 8; ++i)
    out[i] = in[i] + MEGRT_TEST_INCREMENT;
}

/// args: a f32[8], b f32[8], out f32[8].
void multiply(void **args, uint32_t, uint32_t) {
  const float *a = static_cast<const float *>(args[0]);
  const float *b = static_cast<const float *>(args[1]);
  float *out = static_cast<float *>(args[2]);
  for (int i = 0; i < 8; ++i)
    out[i] = a[i] * b[i];
}

/// args: in f32[8], out f32[8]. Calls into libm, so the object has a
/// DT_NEEDED entry for it, as compiled kernels with math calls do.
void exponential(void **args, uint32_t, uint32_t) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int i = 0; i < 8; ++i)
    out[i] = std::exp(in[i]);
}
}

extern "C" {

/// args: in f32[8 * count], out f32[8 * count]; workgroup w writes
/// out[8w, 8w + 8) = in + w.
void add_workgroup_id(void **args, uint32_t workgroup, uint32_t count) {
  (void)count;
  const float *in = static_cast<const float *>(args[0]) + 8 * workgroup;
  float *out = static_cast<float *>(args[1]) + 8 * workgroup;
  for (int i = 0; i < 8; ++i)
    out[i] = in[i] + static_cast<float>(workgroup);
}

/// args: partials f32[count] (scratch), in f32[count]: workgroup w stores
/// in[w] * 2 in its partial.
void double_into_partials(void **args, uint32_t workgroup, uint32_t) {
  float *partials = static_cast<float *>(args[0]);
  const float *in = static_cast<const float *>(args[1]);
  partials[workgroup] = in[workgroup] * 2.0f;
}

/// args: partials f32[8] (scratch), out f32[1]: the partials summed in
/// order (one workgroup).
void sum_partials(void **args, uint32_t, uint32_t) {
  const float *partials = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  float sum = 0.0f;
  for (int i = 0; i < 8; ++i)
    sum += partials[i];
  out[0] = sum;
}
}
