// GEMM on the CPU through CBLAS, with f32 scratch for 16-bit dtypes.
#include "cpu/CpuGemm.h"

#include "Fail.h"
#include "megrt/HalfFloat.h"

#if MEGRT_CPU_BLAS
#include <cblas.h>
#endif
#include <cmath>
#include <limits>

namespace megrt {
namespace {

int64_t span(int64_t batch, int64_t stride, int64_t matrix) {
  return (batch - 1) * stride + matrix;
}

void widen(DType dtype, const void *source, std::vector<float> &out) {
  const auto *bits = static_cast<const uint16_t *>(source);
  float (*convert)(uint16_t) = dtype == DType::BF16 ? bf16ToFloat : f16ToFloat;
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = convert(bits[i]);
}

#if MEGRT_CPU_BLAS
/// Fails unless BLAS integers hold m, n and k.
void checkGemmRunsOnBlas(const GemmParams &params) {
  constexpr int64_t kMaxBlasInt = std::numeric_limits<blasint>::max();
  if (params.m > kMaxBlasInt || params.n > kMaxBlasInt ||
      params.k > kMaxBlasInt)
    fail("gemm m=", params.m, " n=", params.n, " k=", params.k,
         " exceeds the BLAS integer range (", kMaxBlasInt, ")");
}
#else
[[noreturn]] void checkGemmRunsOnBlas(const GemmParams &) {
  fail("this runtime was built without a BLAS (MEGRT_CPU_BLAS=OFF); CPU "
       "matrix products are unavailable");
}
#endif

} // namespace

#if MEGRT_CPU_BLAS
void gemmF32(const GemmParams &p, const float *a, const float *b, float *c,
             const float *bias) {
  auto transA = p.transA ? CblasTrans : CblasNoTrans;
  auto transB = p.transB ? CblasTrans : CblasNoTrans;
  // Leading dimensions of the stored (not the transposed) matrices.
  auto lda = static_cast<blasint>(p.transA ? p.m : p.k);
  auto ldb = static_cast<blasint>(p.transB ? p.k : p.n);
  auto ldc = static_cast<blasint>(p.n);
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    float *cBatch = c + batch * p.strideC;
    cblas_sgemm(CblasRowMajor, transA, transB, static_cast<blasint>(p.m),
                static_cast<blasint>(p.n), static_cast<blasint>(p.k), p.alpha,
                a + batch * p.strideA, lda, b + batch * p.strideB, ldb, p.beta,
                cBatch, ldc);
    if (bias)
      for (int64_t row = 0; row < p.m; ++row)
        for (int64_t col = 0; col < p.n; ++col)
          cBatch[row * p.n + col] += bias[col];
    if (p.geluEpilogue)
      for (int64_t i = 0; i < p.m * p.n; ++i) {
        float x = cBatch[i];
        cBatch[i] = 0.5f * x *
                    (1.0f + std::tanh(0.7978845608028654f *
                                      (x + 0.044715f * x * x * x)));
      }
  }
}
#else
void gemmF32(const GemmParams &p, const float *, const float *, float *,
             const float *) {
  checkGemmRunsOnBlas(p);
}
#endif

CpuGemm::CpuGemm(const GemmParams &params, const void *a, const void *b,
                 void *c, const void *bias)
    : params_(params), a_(a), b_(b), c_(c), bias_(bias) {
  checkGemmRunsOnBlas(params);
  if (params.dtype == DType::F32)
    return;
  scratchA_.resize(span(params.batch, params.strideA, params.m * params.k));
  scratchB_.resize(span(params.batch, params.strideB, params.k * params.n));
  scratchC_.resize(span(params.batch, params.strideC, params.m * params.n));
  if (bias)
    scratchBias_.resize(params.n);
}

void CpuGemm::run() {
  const GemmParams &p = params_;
  if (p.dtype == DType::F32) {
    gemmF32(p, static_cast<const float *>(a_), static_cast<const float *>(b_),
            static_cast<float *>(c_), static_cast<const float *>(bias_));
    return;
  }
  widen(p.dtype, a_, scratchA_);
  widen(p.dtype, b_, scratchB_);
  // BLAS does not read C when beta is 0 (the reference BLAS contract), so its
  // old value need not be widened.
  if (p.beta != 0.0f)
    widen(p.dtype, c_, scratchC_);
  if (bias_)
    widen(p.dtype, bias_, scratchBias_);
  gemmF32(p, scratchA_.data(), scratchB_.data(), scratchC_.data(),
          bias_ ? scratchBias_.data() : nullptr);
  // Only the m x n block of each batch is written; elements between batches
  // (stride_c > m*n) keep their value.
  auto *out = static_cast<uint16_t *>(c_);
  uint16_t (*narrow)(float) = p.dtype == DType::BF16 ? floatToBf16 : floatToF16;
  for (int64_t batch = 0; batch < p.batch; ++batch)
    for (int64_t i = 0; i < p.m * p.n; ++i) {
      int64_t index = batch * p.strideC + i;
      out[index] = narrow(scratchC_[index]);
    }
}

} // namespace megrt
