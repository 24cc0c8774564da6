// The world connectWorld returns: host splits go to the launcher's world,
// CUDA splits to NCCL, which fails clearly where it cannot run.
#include "comm/RuntimeWorld.h"
#include "comm/SingleProcessWorld.h"

#include "megrt/Error.h"
#if MEGRT_WITH_CUDA
#include "CudaTestDevice.h"
#endif

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::comm {
namespace {

using ::testing::HasSubstr;

TEST(RuntimeWorldTest, HostSplitsAreTheHostWorlds) {
  RuntimeWorld world(std::make_unique<SingleProcessWorld>(), 5);
  EXPECT_EQ(world.describe(), "single process");
  std::unique_ptr<Group> group = world.split(0, 0, MemorySpace::Host);
  ASSERT_EQ(group->size(), 1);
  EXPECT_EQ(group->rank(), 0);
  // Over one rank a reduction is the input, written into the output (which
  // starts as NaN, so a collective that writes nothing fails), element by
  // element, for every op.
  const float in[] = {3.0f, -1.5f, 7.25f};
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
    float out[3] = {NAN, NAN, NAN};
    group->run(CollectiveKind::AllReduce, in, out, 3, DType::F32, op, nullptr);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(out[i], in[i]) << "element " << i;
  }
  float gathered[3] = {NAN, NAN, NAN};
  group->run(CollectiveKind::AllGather, in, gathered, 3, DType::F32,
             ReduceOp::Sum, nullptr);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(gathered[i], in[i]) << "gathered element " << i;
}

TEST(RuntimeWorldTest, CudaSplitFailsClearlyWithoutCuda) {
#if MEGRT_WITH_CUDA
  if (!test::cudaDriverError())
    GTEST_SKIP() << "a CUDA driver is present: NcclGroupTest covers CUDA "
                    "splits";
  const char *expected = "rank 0: split of a CUDA group (color 0, key 0): "
                         "CUDA device requested but no CUDA driver was found";
#else
  const char *expected = "split of a CUDA group: this megrt was built "
                         "without CUDA";
#endif
  RuntimeWorld world(std::make_unique<SingleProcessWorld>(), 5);
  try {
    world.split(0, 0, MemorySpace::Cuda);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr(expected));
  }
}

} // namespace
} // namespace megrt::comm
