/* Kernels written by hand against the emulator's interface
   (megemu/Abi.h), as megc's lowering emits them: every id, barrier, shuffle
   and access through a hook. Each is a small pattern of the generated
   kernels, or that pattern with one of the bugs the emulator must catch. */
#include <stdint.h>

void *megemu_hooks[5];

#define ID(which) (((int64_t(*)(int32_t))megemu_hooks[0])(which))
#define BARRIER(site) (((void (*)(int32_t))megemu_hooks[1])(site))
#define SHUFFLE(bits, offset, site)                                            \
  (((int64_t(*)(int64_t, int32_t, int32_t, int32_t, int32_t))megemu_hooks[2])( \
      bits, offset, 32, 0, site))
#define ACCESS(address, bytes, flags, buffer, site)                            \
  (((void (*)(int64_t, int64_t, int32_t, int32_t, int32_t,                     \
              int32_t))megemu_hooks[4])((int64_t)(intptr_t)(address), bytes,  \
                                        flags, buffer, site, 1))
#define READ4 (1 | (2 << 8))
#define WRITE4 (2 | (2 << 8))
#define READ16 (1 | (4 << 8))

enum { kThreads = 64 };

static float load(float *p, int32_t buffer, int32_t site) {
  ACCESS(p, 4, READ4, buffer, site);
  return *p;
}
static void store(float *p, float v, int32_t buffer, int32_t site) {
  ACCESS(p, 4, WRITE4, buffer, site);
  *p = v;
}

/* out[b * T + t] = in[b * T + T - 1 - t] through shared memory; the bug
   variants drop the barrier or read one past the shared buffer. */
static void reverse(void **args, int barrier, int shift) {
  float *in = args[0], *out = args[1], *shared = args[2];
  int64_t t = ID(0), b = ID(3);
  store(&shared[t], load(&in[b * kThreads + t], 0, 0), 2, 1);
  if (barrier)
    BARRIER(2);
  store(&out[b * kThreads + t],
        load(&shared[kThreads - 1 - t + shift], 2, 3), 1, 4);
}
void reverse_emu(void **args) { reverse(args, 1, 0); }
void reverse_no_barrier_emu(void **args) { reverse(args, 0, 0); }
void reverse_off_by_one_emu(void **args) { reverse(args, 1, 1); }

/* out[b * 2 + w] = the sum of in over warp w of block b: xor shuffles. */
void warp_sum_emu(void **args) {
  float *in = args[0], *out = args[1];
  int64_t t = ID(0), b = ID(3);
  float v = load(&in[b * kThreads + t], 0, 0);
  for (int32_t offset = 1; offset < 32; offset *= 2) {
    union {
      float f;
      uint32_t u;
    } x = {v}, y;
    y.u = (uint32_t)SHUFFLE(x.u, offset, 5);
    v += y.f;
  }
  if (t % 32 == 0)
    store(&out[b * 2 + t / 32], v, 1, 4);
}

/* The sum again, but lanes 16-31 skip the shuffles. */
void warp_sum_diverged_emu(void **args) {
  int64_t t = ID(0);
  if (t % 32 < 16)
    (void)SHUFFLE(0, 1, 5);
  (void)args;
}

/* A 16-byte vector read one element past an aligned address. */
void misaligned_vector_emu(void **args) {
  float *in = args[0];
  ACCESS(in + 1, 16, READ16, 0, 6);
}

/* Every thread writes out[0]. */
void same_output_emu(void **args) {
  float *out = args[1];
  store(&out[0], 1.0f, 1, 4);
}

/* Half the block waits at a barrier the other half never reaches. */
void half_barrier_emu(void **args) {
  if (ID(0) < kThreads / 2)
    BARRIER(2);
  (void)args;
}

const char megemu_manifest[] =
    "{\"abi\": 1, \"kernels\": ["
    "{\"name\": \"reverse\", \"args\": 2, \"extents\": [512, 512],"
    " \"workgroup\": [{\"bytes\": 256, \"align\": 16}]},"
    "{\"name\": \"reverse_no_barrier\", \"args\": 2, \"extents\": [512, 512],"
    " \"workgroup\": [{\"bytes\": 256, \"align\": 16}]},"
    "{\"name\": \"reverse_off_by_one\", \"args\": 2, \"extents\": [512, 512],"
    " \"workgroup\": [{\"bytes\": 256, \"align\": 16}]},"
    "{\"name\": \"warp_sum\", \"args\": 2, \"extents\": [512, 16],"
    " \"workgroup\": []},"
    "{\"name\": \"warp_sum_diverged\", \"args\": 2, \"extents\": [512, 16],"
    " \"workgroup\": []},"
    "{\"name\": \"misaligned_vector\", \"args\": 2, \"extents\": [512, 512],"
    " \"workgroup\": []},"
    "{\"name\": \"same_output\", \"args\": 2, \"extents\": [512, 512],"
    " \"workgroup\": []},"
    "{\"name\": \"half_barrier\", \"args\": 2, \"extents\": [-1, -1],"
    " \"workgroup\": []}],"
    " \"sites\": [\"load in\", \"store shared\", \"barrier\", \"load shared\","
    " \"store out\", \"shuffle\", \"vector load\"]}";
