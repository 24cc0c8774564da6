// The checks and names every communicator backend shares.
#include "comm/Collective.h"

#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::comm {
namespace {

using ::testing::HasSubstr;

TEST(CollectiveTest, DescribesForMessages) {
  EXPECT_EQ(describeCollective(CollectiveKind::AllReduce, DType::BF16,
                               ReduceOp::Avg, 1024, 4),
            "all_reduce (avg, bf16, 1024 elements) on a group of 4 ranks");
  EXPECT_EQ(describeCollective(CollectiveKind::AllGather, DType::I64,
                               ReduceOp::Avg, 3, 1),
            "all_gather (i64, 3 elements) on a group of 1 rank");
}

TEST(CollectiveTest, CountsOfSourceAndDestination) {
  EXPECT_EQ(sourceCount(CollectiveKind::AllGather, 5, 4), 5u);
  EXPECT_EQ(destinationCount(CollectiveKind::AllGather, 5, 4), 20u);
  EXPECT_EQ(sourceCount(CollectiveKind::ReduceScatter, 5, 4), 20u);
  EXPECT_EQ(destinationCount(CollectiveKind::ReduceScatter, 5, 4), 5u);
  EXPECT_EQ(sourceCount(CollectiveKind::AllReduce, 5, 4), 5u);
  EXPECT_EQ(destinationCount(CollectiveKind::AllReduce, 5, 4), 5u);
  EXPECT_EQ(sourceCount(CollectiveKind::AllToAll, 5, 4), 20u);
  EXPECT_EQ(destinationCount(CollectiveKind::AllToAll, 5, 4), 20u);
  EXPECT_EQ(describeCollective(CollectiveKind::AllToAll, DType::F32,
                               ReduceOp::Sum, 5, 4),
            "all_to_all (f32, 5 elements) on a group of 4 ranks");
}

TEST(CollectiveTest, IntegerAverageIsRejected) {
  try {
    checkCollective(CollectiveKind::AllReduce, DType::I32, ReduceOp::Avg, 8, 2);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(),
                HasSubstr("all_reduce (avg, i32, 8 elements) on a group of 2 "
                          "ranks: an average needs a floating-point dtype"));
  }
  // Sums of integers, and gathers of any dtype, are fine.
  checkCollective(CollectiveKind::AllReduce, DType::I64, ReduceOp::Sum, 8, 2);
  checkCollective(CollectiveKind::AllGather, DType::I32, ReduceOp::Avg, 8, 2);
}

TEST(CollectiveTest, PendingHandlesAreTakenOnce) {
  PendingCollectives<int> pending;
  uint64_t first = pending.add(10);
  uint64_t second = pending.add(20);
  EXPECT_NE(first, second);
  EXPECT_EQ(pending.take(second, "group"), 20);
  EXPECT_EQ(pending.take(first, "group"), 10);
  EXPECT_TRUE(pending.empty());
  try {
    pending.take(first, "the test group");
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(),
                HasSubstr("the test group: wait for collective handle 1, "
                          "which is not pending"));
  }
}

} // namespace
} // namespace megrt::comm
