// The CPU device's thread pool and the GEMM split it runs.
#include "cpu/ThreadPool.h"
#include "cpu/CpuGemm.h"
#include "megrt/Error.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <gtest/gtest.h>
#include <stdexcept>
#include <thread>
#include <vector>

namespace megrt {
namespace {

TEST(ThreadPool, RunsEveryItemOnce) {
  for (unsigned threads : {1u, 2u, 5u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (uint32_t count : {0u, 1u, 3u, 1000u}) {
      std::vector<std::atomic<int>> seen(count);
      pool.parallelFor(count, [&](uint32_t i) { seen[i].fetch_add(1); });
      for (uint32_t i = 0; i < count; ++i)
        EXPECT_EQ(seen[i].load(), 1) << i << " of " << count;
    }
  }
}

/// Waits until `parties` threads have arrived; false after 10 s (a test
/// failure, not a hang).
bool arriveAndWait(std::atomic<unsigned> &arrived, unsigned parties) {
  arrived.fetch_add(1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (arrived.load() < parties)
    if (std::chrono::steady_clock::now() > deadline)
      return false;
  return true;
}

/// Thread p starts with the p-th contiguous share of the items: with 3
/// threads and 6 items, the caller runs 0 and 1, the workers 2 and 3, and
/// 4 and 5. The items meet at barriers (0, 2 and 4 at the first, the others
/// at the second) so that no thread can finish its share and take another's
/// before its owner does.
TEST(ThreadPool, EachThreadStartsWithItsShare) {
  ThreadPool pool(3);
  for (int repeat = 0; repeat < 20; ++repeat) {
    std::atomic<unsigned> first{0}, second{0};
    std::atomic<bool> timedOut{false};
    std::vector<std::thread::id> ranOn(6);
    pool.parallelFor(6, [&](uint32_t i) {
      ranOn[i] = std::this_thread::get_id();
      if (!arriveAndWait(i % 2 == 0 ? first : second, 3))
        timedOut = true;
    });
    ASSERT_FALSE(timedOut.load());
    EXPECT_EQ(ranOn[0], std::this_thread::get_id());
    for (uint32_t share = 0; share < 3; ++share)
      EXPECT_EQ(ranOn[2 * share], ranOn[2 * share + 1]) << "share " << share;
    EXPECT_NE(ranOn[2], ranOn[0]);
    EXPECT_NE(ranOn[4], ranOn[0]);
    EXPECT_NE(ranOn[2], ranOn[4]);
  }
}

TEST(ThreadPool, RethrowsAnItemsException) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallelFor(100,
                                [](uint32_t i) {
                                  if (i == 42)
                                    throw std::runtime_error("item 42");
                                }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int> sum{0};
  pool.parallelFor(10, [&](uint32_t i) { sum += static_cast<int>(i); });
  EXPECT_EQ(sum.load(), 45);
}

TEST(ThreadPool, NestedLoopsRunInline) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(64);
  pool.parallelFor(8, [&](uint32_t outer) {
    pool.parallelFor(8, [&](uint32_t inner) { seen[outer * 8 + inner]++; });
  });
  for (auto &count : seen)
    EXPECT_EQ(count.load(), 1);
}

TEST(ThreadPool, ThreadCountFromTheEnvironment) {
  setenv("MEGRT_NUM_THREADS", "3", 1);
  EXPECT_EQ(defaultCpuThreads(), 3u);
  for (const char *bad : {"0", "-2", "four", "3x", "5000"}) {
    setenv("MEGRT_NUM_THREADS", bad, 1);
    try {
      defaultCpuThreads();
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error &error) {
      EXPECT_EQ(std::string(error.what()),
                std::string("MEGRT_NUM_THREADS is '") + bad +
                    "'; expected a number of threads from 1 to 4096");
    }
  }
  unsetenv("MEGRT_NUM_THREADS");
  EXPECT_GE(defaultCpuThreads(), 1u);
  EXPECT_THROW(ThreadPool(0), Error);
}

GemmParams gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  return {m,     n,     k,     batch, m * k, k * n,
          m * n, false, false, 1.0f,  0.0f,  DType::F32};
}

/// Each element of C in exactly one block, blocks no smaller than the BLAS
/// needs, and the split depends on the shape only.
TEST(GemmBlocks, CoverCOnceWithAFixedSplit) {
  for (GemmParams p :
       {gemm(512, 1408, 512), gemm(8192, 512, 512), gemm(7, 5, 3),
        gemm(256, 512, 1408, 2), gemm(1000, 130, 4096)}) {
    std::vector<GemmBlock> blocks = gemmBlocks(p);
    EXPECT_LE(blocks.size(), 16u * p.batch);
    std::vector<int> covered(p.batch * p.m * p.n, 0);
    for (const GemmBlock &b : blocks) {
      if (blocks.size() > static_cast<size_t>(p.batch)) {
        EXPECT_TRUE(b.rows >= 64 || b.rows == p.m);
        EXPECT_TRUE(b.cols >= 64 || b.cols == p.n);
      }
      for (int64_t r = b.row; r < b.row + b.rows; ++r)
        for (int64_t c = b.col; c < b.col + b.cols; ++c)
          ++covered[(b.batch * p.m + r) * p.n + c];
    }
    for (int count : covered)
      ASSERT_EQ(count, 1) << p.m << "x" << p.n << "x" << p.k;
  }
  EXPECT_EQ(gemmBlocks(gemm(512, 1408, 512)).size(), 8u);
  EXPECT_EQ(gemmBlocks(gemm(7, 5, 3)).size(), 1u);
}

} // namespace
} // namespace megrt
