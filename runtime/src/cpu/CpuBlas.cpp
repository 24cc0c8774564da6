// The CPU's single-threaded matrix product.
#include "cpu/CpuBlas.h"

#include "Fail.h"

#include <limits>
#include <string>

#if MEGRT_CPU_BLAS_ONEDNN
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#elif MEGRT_CPU_BLAS
#include <cblas.h>
// OpenBLAS's thread control (cblas.h declares it in newer releases only).
extern "C" void openblas_set_num_threads(int threads);
#endif

namespace megrt {
namespace {

#if MEGRT_CPU_BLAS_ONEDNN
/// oneDNN parallelises a call over its OpenMP runtime's threads; the
/// device's threads already run one call each, so the calling thread's
/// OpenMP thread count is 1 during a call and restored after it (an
/// embedding application may use OpenMP itself). The OpenMP runtime is the
/// one libdnnl brought into the process: its functions are looked up there,
/// and a oneDNN on another threading runtime has none to set.
struct OpenMpThreads {
  int (*get)() = nullptr;
  void (*set)(int) = nullptr;
  OpenMpThreads() {
    get =
        reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    set = reinterpret_cast<void (*)(int)>(
        dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (!get || !set)
      get = nullptr, set = nullptr;
  }
};

const OpenMpThreads &openMp() {
  static const OpenMpThreads threads;
  return threads;
}

class OneThread {
public:
  OneThread() {
    if (!openMp().set)
      return;
    previous_ = openMp().get();
    if (previous_ != 1)
      openMp().set(1);
  }
  ~OneThread() {
    if (openMp().set && previous_ != 1)
      openMp().set(previous_);
  }

private:
  int previous_ = 1;
};
#endif

} // namespace

bool haveCpuBlas() { return MEGRT_CPU_BLAS != 0; }

const char *cpuBlasName() {
#if MEGRT_CPU_BLAS_ONEDNN
  static const std::string name = [] {
    const dnnl_version_t *version = dnnl_version();
    return concat("oneDNN ", version->major, ".", version->minor, ".",
                  version->patch);
  }();
  return name.c_str();
#elif MEGRT_CPU_BLAS
  return "OpenBLAS";
#else
  return "none";
#endif
}

void useSingleThreadedBlas() {
#if MEGRT_CPU_BLAS && !MEGRT_CPU_BLAS_ONEDNN
  openblas_set_num_threads(1);
#endif
}

void checkCpuBlas(int64_t m, int64_t n, int64_t k) {
#if MEGRT_CPU_BLAS && !MEGRT_CPU_BLAS_ONEDNN
  constexpr int64_t kMaxBlasInt = std::numeric_limits<blasint>::max();
  if (m > kMaxBlasInt || n > kMaxBlasInt || k > kMaxBlasInt)
    fail("gemm m=", m, " n=", n, " k=", k, " exceeds the BLAS integer range (",
         kMaxBlasInt, ")");
#elif !MEGRT_CPU_BLAS
  fail("this runtime was built without a BLAS (MEGRT_CPU_BLAS=OFF); CPU "
       "matrix products of ",
       m, "x", k, " by ", k, "x", n, " are unavailable");
#endif
}

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc) {
#if MEGRT_CPU_BLAS_ONEDNN
  OneThread one;
  dnnl_status_t status = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                    n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    fail("oneDNN sgemm of ", m, "x", k, " by ", k, "x", n,
         " failed with status ", static_cast<int>(status));
#elif MEGRT_CPU_BLAS
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
#else
  (void)transA, (void)transB, (void)alpha, (void)a, (void)lda, (void)b,
      (void)ldb, (void)beta, (void)c, (void)ldc;
  checkCpuBlas(m, n, k);
#endif
}

} // namespace megrt
