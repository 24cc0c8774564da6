// Small dense kernels the CPU attention is built from.
#include "cpu/TileMath.h"

#include "cpu/CpuBlas.h"

#include <cmath>
#include <cstring>
#include <limits>

// Each loop is compiled for AVX-512, AVX2 and baseline x86-64, the best
// chosen when the runtime is loaded (GCC and Clang function multiversioning).
#if defined(__x86_64__) && defined(__GNUC__)
#define MEGRT_VECTOR_CLONES                                                    \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MEGRT_VECTOR_CLONES
#endif

namespace megrt {

void matmulTile(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                float alpha, const float *a, int64_t lda, const float *b,
                int64_t ldb, float beta, float *c, int64_t ldc) {
  if (haveCpuBlas()) {
    sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    float *row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j)
      row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    for (int64_t p = 0; p < k; ++p) {
      float aip = alpha * (transA ? a[p * lda + i] : a[i * lda + p]);
      for (int64_t j = 0; j < n; ++j)
        row[j] += aip * (transB ? b[j * ldb + p] : b[p * ldb + j]);
    }
  }
}

namespace {

/// Reductions run in this many interleaved lanes (then combined in lane
/// order), so that they vectorize without reassociating: the result is the
/// same on every CPU and for every vector width.
constexpr int64_t kLanes = 16;

} // namespace

/// The lanes as one vector (GCC's and Clang's vector extension, lowered to
/// the clone's widest registers): the compilers vectorize the sums of
/// sumOf, not the selects of maxOf.
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneMask = int32_t __attribute__((vector_size(kLanes * sizeof(float))));

MEGRT_VECTOR_CLONES
float maxOf(const float *values, int64_t count) {
  Lanes lanes;
  for (int64_t j = 0; j < kLanes; ++j)
    lanes[j] = -std::numeric_limits<float>::infinity();
  int64_t full = count / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    Lanes next;
    std::memcpy(&next, values + i, sizeof(next));
    // next > lanes ? next : lanes, lane by lane (a NaN keeps the lane).
    LaneMask greater = next > lanes;
    lanes =
        reinterpret_cast<Lanes>((greater & reinterpret_cast<LaneMask>(next)) |
                                (~greater & reinterpret_cast<LaneMask>(lanes)));
  }
  float result = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < kLanes; ++j)
    result = lanes[j] > result ? lanes[j] : result;
  for (int64_t i = full; i < count; ++i)
    result = values[i] > result ? values[i] : result;
  return result;
}

MEGRT_VECTOR_CLONES
static float sumOf(const float *values, int64_t count) {
  float lanes[kLanes] = {};
  int64_t full = count / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j)
      lanes[j] += values[i + j];
  float result = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j)
    result += lanes[j];
  for (int64_t i = full; i < count; ++i)
    result += values[i];
  return result;
}

MEGRT_VECTOR_CLONES
float expShiftedSum(float *values, int64_t count, float shift) {
  // Cephes' expf: exp(x) = 2^n exp(r), x = n ln 2 + r, |r| <= ln 2 / 2, with
  // ln 2 split in two so that r is exact, and a degree-7 polynomial. n is
  // rounded by adding and subtracting 1.5 * 2^23, whose low mantissa bits
  // then hold it as an integer, and the underflow is a factor 0: no branch
  // and no conversion call, so that the loop vectorizes (this file is
  // compiled with -fno-trapping-math, which lets the selects be vector
  // blends; the values are the same).
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kMin = -87.3365447504f, kMax = 88.3762626647f;
  constexpr float kRound = 12582912.0f;
  constexpr int32_t kRoundBits = 0x4B400000;
  for (int64_t i = 0; i < count; ++i) {
    float x = values[i] - shift;
    float keep = x < kMin ? 0.0f : 1.0f;
    x = x < kMin ? kMin : x;
    x = x > kMax ? kMax : x;
    float t = x * kLog2e + kRound;
    float n = t - kRound;
    int32_t nBits;
    std::memcpy(&nBits, &t, sizeof(nBits));
    float r = x - n * kLn2Hi;
    r = r - n * kLn2Lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = (nBits - kRoundBits + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    values[i] = p * scale * keep;
  }
  return sumOf(values, count);
}

MEGRT_VECTOR_CLONES
void softmaxGradRow(float *p, const float *dp, int64_t count, float delta,
                    float scale) {
  for (int64_t i = 0; i < count; ++i)
    p[i] = p[i] * (dp[i] - delta) * scale;
}

MEGRT_VECTOR_CLONES
void scaleRow(float *values, int64_t count, float factor) {
  for (int64_t i = 0; i < count; ++i)
    values[i] *= factor;
}

MEGRT_VECTOR_CLONES
float dotRow(const float *a, const float *b, int64_t count) {
  float lanes[kLanes] = {};
  int64_t full = count / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j)
      lanes[j] += a[i + j] * b[i + j];
  float result = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j)
    result += lanes[j];
  for (int64_t i = full; i < count; ++i)
    result += a[i] * b[i];
  return result;
}

} // namespace megrt
