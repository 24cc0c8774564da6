// The world of a process started without a launcher: one rank, whose
// collectives are copies.
#include "comm/SingleProcessWorld.h"
#include "comm/Communicator.h"

#include "ScopedEnvironment.h"
#include "megrt/Error.h"
#include "megrt/HalfFloat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace megrt::comm {
namespace {

using test::ScopedEnvironment;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename Body> std::string errorOf(Body body) {
  try {
    body();
  } catch (const Error &error) {
    return error.what();
  }
  return "no error";
}

TEST(SingleProcessWorldTest, ConnectWithoutLauncher) {
  ScopedEnvironment env;
  env.clearLauncher();
  World &world = connectWorld();
  EXPECT_EQ(world.rank(), 0);
  EXPECT_EQ(world.size(), 1);
  EXPECT_EQ(world.localRank(), 0);
  EXPECT_EQ(world.describe(), "single process");
  EXPECT_EQ(&connectWorld(), &world);
}

TEST(SingleProcessWorldTest, ConnectWithWorldOfOne) {
  // A fresh process: connectWorld's world is made once per process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
        setenv("OMPI_COMM_WORLD_RANK", "0", 1);
        World &world = connectWorld();
        std::exit(
            world.size() == 1 && world.describe() == "single process" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(SingleProcessWorldTest, CollectivesAreCopies) {
  SingleProcessWorld world;
  std::unique_ptr<Group> group = world.split(0, 0, MemorySpace::Host);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);

  std::vector<float> src = {1.5f, -2, 3}, dst(3);
  for (CollectiveKind kind :
       {CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
        CollectiveKind::AllReduce}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      dst.assign(3, 0);
      group->run(kind, src.data(), dst.data(), 3, DType::F32, op, nullptr);
      EXPECT_THAT(dst, ElementsAre(1.5f, -2, 3)) << collectiveName(kind);
    }
  }

  std::vector<uint16_t> half = {floatToBf16(0.25f), floatToBf16(7)};
  group->run(CollectiveKind::AllReduce, half.data(), half.data(), 2,
             DType::BF16, ReduceOp::Avg, nullptr);
  EXPECT_EQ(bf16ToFloat(half[0]), 0.25f);
  EXPECT_EQ(bf16ToFloat(half[1]), 7.0f);

  std::vector<int64_t> wide = {1, 2}, wideOut(2);
  group->run(CollectiveKind::AllReduce, wide.data(), wideOut.data(), 2,
             DType::I64, ReduceOp::Sum, nullptr);
  EXPECT_THAT(wideOut, ElementsAre(1, 2));
}

TEST(SingleProcessWorldTest, StartedCollectivesAreWaitedForOnce) {
  SingleProcessWorld world;
  std::unique_ptr<Group> group = world.split(3, 0, MemorySpace::Host);
  float a = 1, b = 2, outA = 0, outB = 0;
  uint64_t first = group->start(CollectiveKind::AllReduce, &a, &outA, 1,
                                DType::F32, ReduceOp::Sum, nullptr);
  uint64_t second = group->start(CollectiveKind::AllGather, &b, &outB, 1,
                                 DType::F32, ReduceOp::Sum, nullptr);
  group->wait(second);
  group->wait(first);
  EXPECT_EQ(outA, 1);
  EXPECT_EQ(outB, 2);
  EXPECT_THAT(errorOf([&] { group->wait(first); }),
              HasSubstr("single-process host group: wait for collective "
                        "handle 1, which is not pending"));
}

TEST(SingleProcessWorldTest, RejectsWhatNoBackendRuns) {
  SingleProcessWorld world;
  std::unique_ptr<Group> group = world.split(0, 0, MemorySpace::Host);
  int32_t value = 1;
  EXPECT_THAT(errorOf([&] {
                group->run(CollectiveKind::ReduceScatter, &value, &value, 1,
                           DType::I32, ReduceOp::Avg, nullptr);
              }),
              HasSubstr("an average needs a floating-point dtype"));
  EXPECT_THAT(errorOf([&] { world.split(-1, 0, MemorySpace::Host); }),
              HasSubstr("color -1 is negative"));
  EXPECT_THAT(errorOf([&] { world.broadcast(&value, 4, 1); }),
              HasSubstr("broadcast from rank 1 in a single-process world"));
}

TEST(SingleProcessWorldTest, AnExchangeWithItselfIsACopy) {
  SingleProcessWorld world;
  std::unique_ptr<Group> group = world.split(0, 0, MemorySpace::Host);
  std::vector<float> send = {1, -2.5f, 3}, recv(3);
  group->wait(group->startExchange(send.data(), 0, recv.data(), 0, 3,
                                   DType::F32, nullptr));
  EXPECT_THAT(recv, ElementsAre(1, -2.5f, 3));
  float value = 0;
  EXPECT_THAT(
      errorOf([&] {
        group->startExchange(&value, 0, nullptr, -1, 1, DType::F32, nullptr);
      }),
      HasSubstr("exchange (f32, 1 element: send to rank 0) on a group of 1 "
                "rank: in a group of one rank, a send to itself needs the "
                "matching receive in the same exchange"));
  EXPECT_THAT(
      errorOf([&] {
        group->startExchange(&value, 1, &value, 0, 1, DType::F32, nullptr);
      }),
      HasSubstr("exchange (f32, 1 element: send to rank 1, receive from rank "
                "0) on a group of 1 rank: rank 1 is not in the group (ranks 0 "
                "to 0, or -1 for no peer)"));
  EXPECT_THAT(errorOf([&] {
                group->startExchange(nullptr, -1, nullptr, -1, 4, DType::F32,
                                     nullptr);
              }),
              HasSubstr("exchange of 4 elements with neither a rank to send "
                        "to nor one to receive from"));
}

TEST(SingleProcessWorldTest, WorldHelpersCopy) {
  SingleProcessWorld world;
  int in = 42, out = 0;
  world.allGatherBytes(&in, &out, sizeof(in));
  EXPECT_EQ(out, 42);
  world.broadcast(&in, sizeof(in), 0);
  EXPECT_EQ(in, 42);
  world.barrier();
}

} // namespace
} // namespace megrt::comm
