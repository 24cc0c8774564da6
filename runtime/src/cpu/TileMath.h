// Small dense kernels the CPU attention is built from: a matrix product of
// tiles (the BLAS, single-threaded, or plain loops without one) and
// vectorized row operations, compiled for the widest vector ISA the CPU has.
#ifndef MEGRT_SRC_CPU_TILEMATH_H
#define MEGRT_SRC_CPU_TILEMATH_H

#include <cstdint>

namespace megrt {

/// Row-major C = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n,
/// with leading dimensions of the stored matrices (as CBLAS).
void matmulTile(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                float alpha, const float *a, int64_t lda, const float *b,
                int64_t ldb, float beta, float *c, int64_t ldc);

/// max of values[0, count); -inf when count is 0.
float maxOf(const float *values, int64_t count);

/// values[i] = exp(values[i] - shift) for i < count (a polynomial accurate
/// to 2 ulp in f32, 0 below the smallest normal); returns their sum.
float expShiftedSum(float *values, int64_t count, float shift);

/// p[i] = p[i] * (dp[i] - delta) * scale: the scores' gradient from the
/// probabilities p, their gradient dp and delta = sum(p * dp).
void softmaxGradRow(float *p, const float *dp, int64_t count, float delta,
                    float scale);

/// values[i] *= factor.
void scaleRow(float *values, int64_t count, float factor);

/// sum of a[i] * b[i].
float dotRow(const float *a, const float *b, int64_t count);

} // namespace megrt

#endif // MEGRT_SRC_CPU_TILEMATH_H
