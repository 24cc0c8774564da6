// The CPU BLAS behind GEMM blocks and attention tiles, against a
// double-precision reference, and its single-threaded calls.
#include "cpu/CpuBlas.h"

#include <cmath>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace megrt {
namespace {

TEST(CpuBlas, NamesTheLibraryItWasBuiltWith) {
  std::string name = cpuBlasName();
#if MEGRT_CPU_BLAS_ONEDNN
  EXPECT_EQ(name.rfind("oneDNN ", 0), 0u) << name;
#elif MEGRT_CPU_BLAS
  EXPECT_EQ(name, "OpenBLAS");
#else
  EXPECT_EQ(name, "none");
  EXPECT_FALSE(haveCpuBlas());
#endif
}

/// Every transpose, leading dimensions wider than the matrices, and beta 0
/// (C not read: NaNs there stay out) and 1, in sizes around the kernels'
/// tiles.
TEST(CpuBlas, MatchesADoubleReference) {
  if (!haveCpuBlas())
    GTEST_SKIP() << "built without a CPU BLAS";
  std::mt19937 generator(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  struct Case {
    int64_t m, n, k;
  };
  for (Case c : {Case{1, 1, 1}, Case{7, 5, 3}, Case{64, 64, 64},
                 Case{65, 130, 17}, Case{256, 96, 300}})
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (float beta : {0.0f, 1.0f}) {
          int64_t lda = (transA ? c.m : c.k) + 3;
          int64_t ldb = (transB ? c.k : c.n) + 5;
          int64_t ldc = c.n + 2;
          std::vector<float> a((transA ? c.k : c.m) * lda);
          std::vector<float> b((transB ? c.n : c.k) * ldb);
          std::vector<float> out(c.m * ldc);
          for (float &x : a)
            x = uniform(generator);
          for (float &x : b)
            x = uniform(generator);
          for (float &x : out)
            x = beta == 0.0f ? std::nanf("") : uniform(generator);
          std::vector<float> before = out;
          float alpha = 0.5f;
          sgemm(transA, transB, c.m, c.n, c.k, alpha, a.data(), lda, b.data(),
                ldb, beta, out.data(), ldc);
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < c.n; ++j) {
              double sum = 0, magnitude = 0;
              for (int64_t p = 0; p < c.k; ++p) {
                double x = transA ? a[p * lda + i] : a[i * lda + p];
                double y = transB ? b[j * ldb + p] : b[p * ldb + j];
                sum += x * y;
                magnitude += std::fabs(x * y);
              }
              double expected = alpha * sum;
              if (beta != 0.0f)
                expected += beta * before[i * ldc + j];
              ASSERT_NEAR(out[i * ldc + j], expected,
                          1e-6 * (magnitude + 1) * 4)
                  << c.m << "x" << c.n << "x" << c.k << " transA " << transA
                  << " transB " << transB << " beta " << beta << " at " << i
                  << "," << j;
            }
          // The padding between rows of C is never written.
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = c.n; j < ldc; ++j)
              ASSERT_TRUE(std::isnan(out[i * ldc + j]) ==
                          std::isnan(before[i * ldc + j]));
        }
}

#if MEGRT_CPU_BLAS_ONEDNN
/// oneDNN's OpenMP thread count is 1 during a call and the caller's after
/// it: an embedding application's own OpenMP setting is left alone.
TEST(CpuBlas, LeavesTheCallersOpenMpThreadCount) {
  auto get =
      reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  auto set = reinterpret_cast<void (*)(int)>(
      dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (!get || !set)
    GTEST_SKIP() << "oneDNN runs on another threading runtime";
  int original = get();
  set(3);
  std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
  sgemm(false, false, 64, 64, 64, 1.0f, a.data(), 64, a.data(), 64, 0.0f,
        c.data(), 64);
  EXPECT_EQ(get(), 3);
  EXPECT_EQ(c[0], 64.0f);
  set(original);
}
#endif

} // namespace
} // namespace megrt
