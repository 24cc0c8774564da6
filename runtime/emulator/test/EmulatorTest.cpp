// The emulator on kernels written against its interface: results, and the
// error each kind of bug gets.
#include "megemu/Emulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace megemu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr unsigned kThreads = 64, kBlocks = 2;

class EmulatorTest : public ::testing::Test {
protected:
  EmulatorTest() : library(MEGEMU_TEST_KERNELS) {
    for (unsigned i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(i);
  }

  /// Runs `name` on in and out with 2 blocks of 64 threads; the error, or
  /// an empty string.
  std::string run(const std::string &name, uint64_t outBytes = 512) {
    const KernelInfo *kernel = library.find(name);
    EXPECT_NE(kernel, nullptr) << name;
    LaunchConfig config;
    config.grid.x = kBlocks;
    config.block.x = kThreads;
    try {
      launch(library, *kernel, config,
             {{in.data(), in.size() * 4}, {out.data(), outBytes}});
    } catch (const EmulationError &e) {
      return e.what();
    }
    return "";
  }

  KernelLibrary library;
  std::vector<float> in = std::vector<float>(kThreads * kBlocks);
  std::vector<float> out = std::vector<float>(kThreads * kBlocks, -1.0f);
};

TEST_F(EmulatorTest, RunsBlocksThreadsAndBarriers) {
  EXPECT_EQ(run("reverse"), "");
  for (unsigned b = 0; b < kBlocks; ++b)
    for (unsigned t = 0; t < kThreads; ++t)
      EXPECT_EQ(out[b * kThreads + t], in[b * kThreads + kThreads - 1 - t]);
}

TEST_F(EmulatorTest, ShufflesWithinWarps) {
  EXPECT_EQ(run("warp_sum"), "");
  for (unsigned w = 0; w < kBlocks * 2; ++w) {
    float sum = 0;
    for (unsigned l = 0; l < 32; ++l)
      sum += in[w * 32 + l];
    EXPECT_EQ(out[w], sum) << "warp " << w;
  }
}

TEST_F(EmulatorTest, MissingBarrierIsCaught) {
  // Thread 0 runs first, so its read of thread 63's element comes before
  // the write: read before written.
  EXPECT_THAT(run("reverse_no_barrier"),
              AllOf(HasSubstr("kernel 'reverse_no_barrier'"),
                    HasSubstr("block (0, 0, 0)"), HasSubstr("load shared"),
                    HasSubstr("reads byte 252 of workgroup buffer 0 before "
                              "any thread of the block wrote it")));
}

TEST_F(EmulatorTest, SharedIndexOffByOneIsOutOfBounds) {
  EXPECT_THAT(run("reverse_off_by_one"),
              AllOf(HasSubstr("kernel 'reverse_off_by_one'"),
                    HasSubstr("thread 0"), HasSubstr("read of 4 bytes"),
                    HasSubstr("byte offset 256 of workgroup buffer 0"),
                    HasSubstr("out of bounds")));
}

TEST_F(EmulatorTest, MisalignedVectorAccessFaults) {
  EXPECT_THAT(run("misaligned_vector"),
              AllOf(HasSubstr("vector load"), HasSubstr("read of 16 bytes"),
                    HasSubstr("not aligned to 16 bytes")));
}

TEST_F(EmulatorTest, ThreadsWritingOneElementRace) {
  // The lanes of one warp writing it in one store are defined (one lands);
  // the next warp's write races.
  EXPECT_THAT(run("same_output"),
              AllOf(HasSubstr("write by thread 32"),
                    HasSubstr("races with a write"), HasSubstr("thread 31")));
}

TEST_F(EmulatorTest, ShuffleLanesMustAllArrive) {
  EXPECT_THAT(run("warp_sum_diverged"),
              AllOf(HasSubstr("lane 16 of warp 0"), HasSubstr("left the kernel"),
                    HasSubstr("every lane of a warp")));
}

TEST_F(EmulatorTest, BarrierEveryThreadMustReach) {
  EXPECT_THAT(run("half_barrier"),
              AllOf(HasSubstr("threads 0-31 wait at barrier"),
                    HasSubstr("threads 32-63 never reach")));
}

TEST_F(EmulatorTest, ArgumentSmallerThanTheKernelsViewIsRefused) {
  EXPECT_THAT(run("reverse", 256),
              AllOf(HasSubstr("argument 1"), HasSubstr("spans 512 bytes"),
                    HasSubstr("holds 256")));
}

TEST_F(EmulatorTest, LaunchBeyondTheDeviceLimitsIsRefused) {
  const KernelInfo *kernel = library.find("reverse");
  LaunchConfig config;
  config.block.x = 2048;
  EXPECT_THROW(launch(library, *kernel, config,
                      {{in.data(), 512}, {out.data(), 512}}),
               EmulationError);
}

TEST(KernelLibraryTest, NotALibraryIsAnError) {
  EXPECT_THROW(KernelLibrary("/nonexistent/kernels.so"), EmulationError);
}

} // namespace
} // namespace megemu
