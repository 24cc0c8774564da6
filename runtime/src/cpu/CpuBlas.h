// The CPU's single-threaded matrix product: oneDNN's sgemm or OpenBLAS's
// CBLAS, whichever the runtime was built with (MEGRT_CPU_BLAS). The
// device's threads are the parallelism: every call runs on its caller.
#ifndef MEGRT_SRC_CPU_CPUBLAS_H
#define MEGRT_SRC_CPU_CPUBLAS_H

#include <cstdint>

namespace megrt {

/// Whether the runtime was built with a BLAS (without one, CPU GEMM
/// commands fail and attention tiles use plain loops).
bool haveCpuBlas();

/// Fails, naming the problem, unless sgemm can multiply m x k by k x n: the
/// runtime has a BLAS and its integers hold the sizes.
void checkCpuBlas(int64_t m, int64_t n, int64_t k);

/// The library behind sgemm, e.g. "oneDNN 2.6.3", or "none".
const char *cpuBlasName();

/// Row-major C = alpha * op(A) * op(B) + beta * C on the calling thread,
/// op(A) m x k and op(B) k x n, with the leading dimensions of the stored
/// matrices (as CBLAS), sizes that checkCpuBlas accepts. The same call
/// gives the same bits on any thread.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc);

/// Makes the BLAS run each call on one thread (OpenBLAS's setting is
/// process-wide; oneDNN's is set around each call).
void useSingleThreadedBlas();

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUBLAS_H
