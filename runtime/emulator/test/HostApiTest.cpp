// Host builds of CUDA code on the emulator: ids, barriers, shuffles and
// dynamic shared memory through the host API.
#include "megemu/Emulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace megemu {
namespace {

using ::testing::HasSubstr;

TEST(HostApiTest, BlockSumThroughSharedMemoryAndShuffles) {
  constexpr unsigned kThreads = 128, kBlocks = 3;
  std::vector<float> in(kThreads * kBlocks), out(kBlocks);
  for (unsigned i = 0; i < in.size(); ++i)
    in[i] = static_cast<float>(i % 7);
  LaunchConfig config;
  config.grid.x = kBlocks;
  config.block.x = kThreads;
  config.dynamicSharedBytes = kThreads / 32 * sizeof(float);
  launchHost("block_sum", config, [&] {
    unsigned t = threadIdx().x, b = blockIdx().x;
    float v = in[b * blockDim().x + t];
    for (int offset = 16; offset > 0; offset /= 2) {
      float other;
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      bits = shuffle(bits, offset, 32, kShuffleDown);
      std::memcpy(&other, &bits, 4);
      v += other;
    }
    auto *partials = static_cast<float *>(dynamicShared());
    if (t % 32 == 0)
      partials[t / 32] = v;
    syncThreads();
    if (t == 0) {
      float sum = 0;
      for (unsigned w = 0; w < blockDim().x / 32; ++w)
        sum += partials[w];
      out[b] = sum;
    }
  });
  for (unsigned b = 0; b < kBlocks; ++b) {
    float sum = 0;
    for (unsigned t = 0; t < kThreads; ++t)
      sum += in[b * kThreads + t];
    EXPECT_EQ(out[b], sum) << "block " << b;
  }
}

TEST(HostApiTest, SegmentedShuffleStaysInItsSegment) {
  std::vector<uint32_t> got(32);
  LaunchConfig config;
  config.block.x = 32;
  launchHost("segments", config, [&] {
    unsigned lane = threadIdx().x;
    got[lane] = shuffle(lane, 0, 8, kShuffleIdx);
  });
  for (unsigned lane = 0; lane < 32; ++lane)
    EXPECT_EQ(got[lane], lane / 8 * 8) << "lane " << lane;
}

TEST(HostApiTest, ABarrierInsideADivergentBranchIsAnError) {
  LaunchConfig config;
  config.block.x = 64;
  try {
    launchHost("diverged", config, [&] {
      if (threadIdx().x % 2 == 0)
        syncThreads();
    });
    FAIL() << "no error";
  } catch (const EmulationError &e) {
    EXPECT_THAT(e.what(), HasSubstr("kernel 'diverged'"));
    EXPECT_THAT(e.what(), HasSubstr("never reach"));
  }
}

} // namespace
} // namespace megemu
