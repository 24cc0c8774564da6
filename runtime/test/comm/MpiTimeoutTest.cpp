// A peer that never joins a collective: the waiting rank gets a timeout
// error, and the job still ends (RunMpiTest.cmake's "abort" mode checks
// that rank 0 aborts the job at exit, which ends the stalled rank). Run
// alone, on two ranks, with MEGRT_COMM_TIMEOUT=2.
#include "comm/Communicator.h"

#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace megrt::comm {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

TEST(MpiTimeoutTest, StalledPeer) {
  World &world = connectWorld();
  ASSERT_EQ(world.size(), 2);
  std::unique_ptr<Group> group =
      world.split(0, world.rank(), MemorySpace::Host);
  if (world.rank() == 1) {
    // Stalls; rank 0's abort at exit ends this process long before.
    std::this_thread::sleep_for(std::chrono::seconds(40));
    std::printf("rank 1: still running after 40 s: the job was not "
                "aborted\n");
    return;
  }
  float value = 1, sum = 0;
  auto start = Clock::now();
  try {
    group->run(CollectiveKind::AllReduce, &value, &sum, 1, DType::F32,
               ReduceOp::Sum, nullptr);
    ADD_FAILURE() << "expected a timeout";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(),
                HasSubstr("rank 0: all_reduce (sum, f32, 1 element) on a "
                          "group of 2 ranks (color 0) did not complete "
                          "within 2 s; a peer rank may have died or stalled "
                          "(MEGRT_COMM_TIMEOUT sets the limit)"));
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(seconds, 2.0);
  EXPECT_LT(seconds, 6.0);
  std::printf("rank 0: the all_reduce timed out after %.2f s\n", seconds);

  // MPI is unusable now: later calls fail at once instead of waiting.
  start = Clock::now();
  try {
    world.barrier();
    ADD_FAILURE() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(),
                HasSubstr("MPI is unusable after an earlier failure"));
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
}

} // namespace
} // namespace megrt::comm
