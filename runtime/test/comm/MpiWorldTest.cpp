// The MPI world and its host groups, run by every rank under mpirun (see
// CommTests.cmake): each rank contributes rankValues(rank) and checks the
// results against sums computed here. Tests call the same collectives on
// every rank whatever they find, so that a failure cannot hang the others.
#include "comm/Communicator.h"

#include "RankValues.h"
#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace megrt::comm {
namespace {

using test::fromBf16;
using test::rankSum;
using test::rankValues;
using test::toBf16;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr size_t kCount = 29;

World &world() { return connectWorld(); }

std::unique_ptr<Group> wholeWorld() {
  return world().split(0, world().rank(), MemorySpace::Host);
}

TEST(MpiWorldTest, MatchesLauncher) {
  EXPECT_GT(world().size(), 1);
  EXPECT_THAT(world().describe(), StartsWith("MPI (Open MPI v"));
  if (const char *rank = std::getenv("OMPI_COMM_WORLD_RANK")) {
    EXPECT_EQ(world().rank(), std::atoi(rank));
  }
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    EXPECT_EQ(world().localRank(), std::atoi(local));
  }
}

// Blocks passed around a ring, and a pipeline's activations forward and
// gradients backward at once (the first rank only sends forward, the last
// only receives), each started before either is waited for.
TEST(MpiWorldTest, ExchangesPairSendsWithReceives) {
  std::unique_ptr<Group> group = wholeWorld();
  int rank = group->rank(), size = group->size();
  int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  std::vector<float> mine = rankValues(rank, kCount), ring(kCount, -1);
  group->wait(group->startExchange(mine.data(), next, ring.data(), previous,
                                   kCount, DType::F32, nullptr));
  EXPECT_EQ(ring, rankValues(previous, kCount));

  std::vector<float> forward(kCount, -1), backward(kCount, -1);
  std::vector<float> gradient = rankValues(rank + size, kCount);
  uint64_t activations = group->startExchange(
      mine.data(), rank + 1 < size ? rank + 1 : -1, forward.data(),
      rank > 0 ? rank - 1 : -1, kCount, DType::F32, nullptr);
  uint64_t gradients = group->startExchange(
      gradient.data(), rank > 0 ? rank - 1 : -1, backward.data(),
      rank + 1 < size ? rank + 1 : -1, kCount, DType::F32, nullptr);
  group->wait(gradients);
  group->wait(activations);
  if (rank > 0)
    EXPECT_EQ(forward, rankValues(rank - 1, kCount));
  else
    EXPECT_EQ(forward, std::vector<float>(kCount, -1));
  if (rank + 1 < size)
    EXPECT_EQ(backward, rankValues(rank + 1 + size, kCount));
  else
    EXPECT_EQ(backward, std::vector<float>(kCount, -1));
}

TEST(MpiWorldTest, BroadcastAndAllGatherBytes) {
  int root = world().size() - 1;
  int message[2] = {0, 0};
  if (world().rank() == root) {
    message[0] = 42;
    message[1] = root;
  }
  world().broadcast(message, sizeof(message), root);
  EXPECT_EQ(message[0], 42);
  EXPECT_EQ(message[1], root);

  struct Entry {
    int rank;
    int square;
  } mine{world().rank(), world().rank() * world().rank()};
  std::vector<Entry> all(world().size());
  world().allGatherBytes(&mine, all.data(), sizeof(Entry));
  for (int r = 0; r < world().size(); ++r) {
    EXPECT_EQ(all[r].rank, r);
    EXPECT_EQ(all[r].square, r * r);
  }
  world().barrier();
}

TEST(MpiWorldTest, AllGather) {
  std::unique_ptr<Group> group = wholeWorld();
  int size = group->size();
  ASSERT_EQ(size, world().size());
  EXPECT_EQ(group->rank(), world().rank());

  std::vector<float> f32(kCount * size);
  group->run(CollectiveKind::AllGather,
             rankValues(group->rank(), kCount).data(), f32.data(), kCount,
             DType::F32, ReduceOp::Sum, nullptr);
  std::vector<uint16_t> bf16(kCount * size);
  group->run(CollectiveKind::AllGather,
             toBf16(rankValues(group->rank(), kCount)).data(), bf16.data(),
             kCount, DType::BF16, ReduceOp::Sum, nullptr);
  // Integers are gathered as bytes, wide values included.
  int64_t wide[2] = {int64_t(group->rank()) << 40, -group->rank()};
  std::vector<int64_t> wides(2 * size);
  group->run(CollectiveKind::AllGather, wide, wides.data(), 2, DType::I64,
             ReduceOp::Sum, nullptr);

  std::vector<float> bf16Values = fromBf16(bf16);
  for (int r = 0; r < size; ++r) {
    std::vector<float> expected = rankValues(r, kCount);
    for (size_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(f32[r * kCount + i], expected[i]) << r << " " << i;
      EXPECT_EQ(bf16Values[r * kCount + i], expected[i]) << r << " " << i;
    }
    EXPECT_EQ(wides[2 * r], int64_t(r) << 40);
    EXPECT_EQ(wides[2 * r + 1], -r);
  }
}

TEST(MpiWorldTest, AllToAll) {
  std::unique_ptr<Group> group = wholeWorld();
  int size = group->size(), rank = group->rank();
  // Rank r sends piece p = [100 r + p, ...]; it receives from rank p the
  // values 100 p + r.
  std::vector<float> sent(kCount * size), received(kCount * size, -1.0f);
  for (int p = 0; p < size; ++p)
    for (size_t i = 0; i < kCount; ++i)
      sent[p * kCount + i] = float(100 * rank + p) + 0.001f * float(i);
  group->run(CollectiveKind::AllToAll, sent.data(), received.data(), kCount,
             DType::F32, ReduceOp::Sum, nullptr);
  std::vector<uint16_t> sent16 = toBf16(sent), received16(kCount * size);
  group->run(CollectiveKind::AllToAll, sent16.data(), received16.data(),
             kCount, DType::BF16, ReduceOp::Sum, nullptr);
  std::vector<float> bf16Values = fromBf16(received16);
  for (int p = 0; p < size; ++p)
    for (size_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(received[p * kCount + i],
                float(100 * p + rank) + 0.001f * float(i))
          << p << " " << i;
      // What rank p sent to this rank, as bits: the same bf16 rounding.
      EXPECT_EQ(bf16Values[p * kCount + i],
                fromBf16(toBf16({float(100 * p + rank) +
                                 0.001f * float(i)}))[0])
          << p << " " << i;
    }
  // In place it would overwrite what it has yet to send.
  if (size > 1) {
    EXPECT_THROW(group->run(CollectiveKind::AllToAll, sent.data(),
                            sent.data(), kCount, DType::F32, ReduceOp::Sum,
                            nullptr),
                 Error);
  }
}

TEST(MpiWorldTest, AllGatherInPlace) {
  std::unique_ptr<Group> group = wholeWorld();
  std::vector<float> data(kCount * group->size(), -1);
  std::vector<float> mine = rankValues(group->rank(), kCount);
  std::memcpy(data.data() + group->rank() * kCount, mine.data(),
              kCount * sizeof(float));
  group->run(CollectiveKind::AllGather, data.data() + group->rank() * kCount,
             data.data(), kCount, DType::F32, ReduceOp::Sum, nullptr);
  // Every element of every rank's chunk (the gather must fill the chunks
  // it does not own, which start as -1).
  for (int r = 0; r < group->size(); ++r) {
    std::vector<float> expected = rankValues(r, kCount);
    for (size_t i = 0; i < kCount; ++i)
      EXPECT_EQ(data[r * kCount + i], expected[i])
          << "rank " << r << " element " << i;
  }
}

/// Reduce-scatter and all-reduce of f32 and bf16, sum and average.
class MpiReduceTest : public ::testing::TestWithParam<ReduceOp> {};

TEST_P(MpiReduceTest, ReduceScatter) {
  ReduceOp op = GetParam();
  std::unique_ptr<Group> group = wholeWorld();
  int size = group->size(), rank = group->rank();
  std::vector<float> src = rankValues(rank, kCount * size);
  std::vector<float> f32(kCount);
  group->run(CollectiveKind::ReduceScatter, src.data(), f32.data(), kCount,
             DType::F32, op, nullptr);
  std::vector<uint16_t> bf16(kCount);
  group->run(CollectiveKind::ReduceScatter, toBf16(src).data(), bf16.data(),
             kCount, DType::BF16, op, nullptr);

  std::vector<float> bf16Values = fromBf16(bf16);
  double divisor = op == ReduceOp::Avg ? size : 1;
  for (size_t i = 0; i < kCount; ++i) {
    double expected = rankSum(size, rank * kCount + i) / divisor;
    EXPECT_EQ(f32[i], static_cast<float>(expected)) << i;
    EXPECT_EQ(bf16Values[i], bf16ToFloat(floatToBf16(expected))) << i;
  }
}

TEST_P(MpiReduceTest, AllReduce) {
  ReduceOp op = GetParam();
  std::unique_ptr<Group> group = wholeWorld();
  int size = group->size();
  std::vector<float> f32 = rankValues(group->rank(), kCount);
  // In place (src == dst).
  group->run(CollectiveKind::AllReduce, f32.data(), f32.data(), kCount,
             DType::F32, op, nullptr);
  std::vector<uint16_t> bf16(kCount);
  group->run(CollectiveKind::AllReduce,
             toBf16(rankValues(group->rank(), kCount)).data(), bf16.data(),
             kCount, DType::BF16, op, nullptr);
  std::vector<uint16_t> f16(kCount);
  std::vector<uint16_t> f16Source(kCount);
  for (size_t i = 0; i < kCount; ++i)
    f16Source[i] = floatToF16(rankValues(group->rank(), kCount)[i]);
  group->run(CollectiveKind::AllReduce, f16Source.data(), f16.data(), kCount,
             DType::F16, op, nullptr);

  double divisor = op == ReduceOp::Avg ? size : 1;
  std::vector<float> bf16Values = fromBf16(bf16);
  for (size_t i = 0; i < kCount; ++i) {
    double expected = rankSum(size, i) / divisor;
    EXPECT_EQ(f32[i], static_cast<float>(expected)) << i;
    EXPECT_EQ(bf16Values[i], bf16ToFloat(floatToBf16(expected))) << i;
    EXPECT_EQ(f16ToFloat(f16[i]), f16ToFloat(floatToF16(expected))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(SumAndAvg, MpiReduceTest,
                         ::testing::Values(ReduceOp::Sum, ReduceOp::Avg),
                         [](const auto &info) {
                           return info.param == ReduceOp::Sum ? "Sum" : "Avg";
                         });

TEST(MpiWorldTest, IntegerSums) {
  std::unique_ptr<Group> group = wholeWorld();
  int size = group->size(), rank = group->rank();
  int32_t narrow[3] = {rank, -rank, 1};
  group->run(CollectiveKind::AllReduce, narrow, narrow, 3, DType::I32,
             ReduceOp::Sum, nullptr);
  int64_t wide = int64_t(rank + 1) << 33;
  int64_t wideSum = 0;
  group->run(CollectiveKind::AllReduce, &wide, &wideSum, 1, DType::I64,
             ReduceOp::Sum, nullptr);
  int triangle = size * (size - 1) / 2;
  EXPECT_EQ(narrow[0], triangle);
  EXPECT_EQ(narrow[1], -triangle);
  EXPECT_EQ(narrow[2], size);
  EXPECT_EQ(wideSum, int64_t(triangle + size) << 33);
}

// The maximum over the ranks, for each dtype (16-bit floats through their
// own MPI operation), with ties and negative values.
TEST(MpiWorldTest, AllReduceMax) {
  std::unique_ptr<Group> group = wholeWorld();
  int size = group->size(), rank = group->rank();
  auto value = [](int r, size_t i) {
    return static_cast<float>(((r * 7 + static_cast<int>(i) * 3) % 11) - 5);
  };
  std::vector<float> f32(kCount);
  std::vector<uint16_t> bf16(kCount), f16(kCount);
  std::vector<int32_t> i32(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    f32[i] = value(rank, i);
    bf16[i] = floatToBf16(f32[i]);
    f16[i] = floatToF16(f32[i]);
    i32[i] = static_cast<int32_t>(f32[i]);
  }
  group->run(CollectiveKind::AllReduce, f32.data(), f32.data(), kCount,
             DType::F32, ReduceOp::Max, nullptr);
  group->run(CollectiveKind::AllReduce, bf16.data(), bf16.data(), kCount,
             DType::BF16, ReduceOp::Max, nullptr);
  group->run(CollectiveKind::AllReduce, f16.data(), f16.data(), kCount,
             DType::F16, ReduceOp::Max, nullptr);
  group->run(CollectiveKind::AllReduce, i32.data(), i32.data(), kCount,
             DType::I32, ReduceOp::Max, nullptr);
  for (size_t i = 0; i < kCount; ++i) {
    float expected = value(0, i);
    for (int r = 1; r < size; ++r)
      expected = std::max(expected, value(r, i));
    EXPECT_EQ(f32[i], expected) << i;
    EXPECT_EQ(bf16ToFloat(bf16[i]), expected) << i;
    EXPECT_EQ(f16ToFloat(f16[i]), expected) << i;
    EXPECT_EQ(i32[i], static_cast<int32_t>(expected)) << i;
  }
}

TEST(MpiWorldTest, LargeAllReduce) {
  std::unique_ptr<Group> group = wholeWorld();
  const size_t count = size_t(1) << 18;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = static_cast<float>((group->rank() + 1) * (i % 1000));
  group->run(CollectiveKind::AllReduce, data.data(), data.data(), count,
             DType::F32, ReduceOp::Sum, nullptr);
  int size = group->size();
  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i)
    mismatches +=
        data[i] != static_cast<float>(size * (size + 1) / 2 * (i % 1000));
  EXPECT_EQ(mismatches, 0u);
}

/// Pairs of neighbours (color rank / 2) ordered by descending world rank
/// (key -rank); then the evens and the odds.
TEST(MpiWorldTest, SplitsByColorAndKey) {
  int rank = world().rank(), size = world().size();
  ASSERT_EQ(size % 2, 0) << "the split test needs an even world";
  std::unique_ptr<Group> pairs =
      world().split(rank / 2, -rank, MemorySpace::Host);
  std::unique_ptr<Group> parity =
      world().split(rank % 2, rank, MemorySpace::Host);

  int32_t members[2] = {-1, -1};
  pairs->run(CollectiveKind::AllGather, &rank, members, 1, DType::I32,
             ReduceOp::Sum, nullptr);
  EXPECT_EQ(pairs->size(), 2);
  EXPECT_EQ(pairs->rank(), rank % 2 == 1 ? 0 : 1);
  EXPECT_EQ(members[0], rank / 2 * 2 + 1);
  EXPECT_EQ(members[1], rank / 2 * 2);

  std::vector<int32_t> sameParity(size / 2, -1);
  parity->run(CollectiveKind::AllGather, &rank, sameParity.data(), 1,
              DType::I32, ReduceOp::Sum, nullptr);
  EXPECT_EQ(parity->size(), size / 2);
  EXPECT_EQ(parity->rank(), rank / 2);
  for (int i = 0; i < size / 2; ++i)
    EXPECT_EQ(sameParity[i], 2 * i + rank % 2);

  // A sum over each pair only.
  float value = static_cast<float>(rank), pairSum = 0;
  pairs->run(CollectiveKind::AllReduce, &value, &pairSum, 1, DType::F32,
             ReduceOp::Sum, nullptr);
  EXPECT_EQ(pairSum, static_cast<float>(4 * (rank / 2) + 1));
}

/// Two collectives on two groups in flight at once, waited for in the
/// other order.
TEST(MpiWorldTest, OverlappingCollectives) {
  int rank = world().rank(), size = world().size();
  std::unique_ptr<Group> all = wholeWorld();
  std::unique_ptr<Group> pairs =
      world().split(rank / 2, rank, MemorySpace::Host);
  std::vector<float> reduced = rankValues(rank, kCount);
  std::vector<uint16_t> gathered(kCount * pairs->size());
  std::vector<uint16_t> mine = toBf16(rankValues(rank, kCount));
  uint64_t first =
      all->start(CollectiveKind::AllReduce, reduced.data(), reduced.data(),
                 kCount, DType::F32, ReduceOp::Avg, nullptr);
  uint64_t second =
      pairs->start(CollectiveKind::AllGather, mine.data(), gathered.data(),
                   kCount, DType::BF16, ReduceOp::Sum, nullptr);
  pairs->wait(second);
  all->wait(first);
  for (size_t i = 0; i < kCount; ++i)
    EXPECT_EQ(reduced[i], static_cast<float>(rankSum(size, i) / size));
  std::vector<float> gatheredValues = fromBf16(gathered);
  for (int member = 0; member < pairs->size(); ++member)
    EXPECT_EQ(gatheredValues[member * kCount + 5],
              rankValues(rank / 2 * 2 + member, kCount)[5]);
}

TEST(MpiWorldTest, ErrorsCrossThePlugin) {
  std::unique_ptr<Group> group = wholeWorld();
  try {
    group->wait(12345);
    ADD_FAILURE() << "expected megrt::Error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("wait for collective handle 12345, "
                                        "which is not pending"));
  }
  int32_t value = 1;
  EXPECT_THROW(group->run(CollectiveKind::AllReduce, &value, &value, 1,
                          DType::I32, ReduceOp::Avg, nullptr),
               Error);
  EXPECT_THROW(world().broadcast(&value, 4, world().size()), Error);
  EXPECT_THROW(world().split(-1, 0, MemorySpace::Host), Error);
}

} // namespace
} // namespace megrt::comm
