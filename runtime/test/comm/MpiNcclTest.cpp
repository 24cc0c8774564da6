// CUDA groups across ranks under mpirun, one GPU per rank of a host (the
// local rank's); every rank skips when any rank lacks a GPU, since CUDA
// splits are collective.
#include "comm/Communicator.h"

#include "CudaTestDevice.h"
#include "RankValues.h"

#include <gtest/gtest.h>

namespace megrt::comm {
namespace {

using test::CudaTestDevice;
using test::fromBf16;
using test::rankSum;
using test::rankValues;
using test::toBf16;

TEST(MpiNcclTest, CollectivesAcrossGpus) {
  World &world = connectWorld();
  std::optional<std::string> reason =
      test::cudaUnavailable(world.localRank() + 1);
  std::vector<char> unavailable(world.size());
  char mine = reason.has_value();
  world.allGatherBytes(&mine, unavailable.data(), 1);
  for (int r = 0; r < world.size(); ++r)
    if (unavailable[r])
      GTEST_SKIP() << "rank " << r << " has no GPU of its own"
                   << (reason ? ": " + *reason : std::string());

  CudaTestDevice device(world.localRank());
  int rank = world.rank(), size = world.size();
  std::unique_ptr<Group> group = world.split(0, rank, MemorySpace::Cuda);
  ASSERT_EQ(group->size(), size);
  const size_t count = 4099;

  uint16_t *bf16 = device.upload(toBf16(rankValues(rank, count)));
  group->run(CollectiveKind::AllReduce, bf16, bf16, count, DType::BF16,
             ReduceOp::Avg, device.stream());
  std::vector<float> averaged = fromBf16(device.download(bf16, count));

  float *gathered = device.allocate<float>(count * size);
  group->run(CollectiveKind::AllGather, device.upload(rankValues(rank, count)),
             gathered, count, DType::F32, ReduceOp::Sum, device.stream());
  std::vector<float> all = device.download(gathered, count * size);

  float *scattered = device.allocate<float>(count);
  group->run(CollectiveKind::ReduceScatter,
             device.upload(rankValues(rank, count * size)), scattered, count,
             DType::F32, ReduceOp::Sum, device.stream());
  std::vector<float> piece = device.download(scattered, count);

  // Piece p of the exchange is rank p's piece for this rank.
  float *exchanged = device.allocate<float>(count * size);
  group->run(CollectiveKind::AllToAll,
             device.upload(rankValues(rank, count * size)), exchanged, count,
             DType::F32, ReduceOp::Sum, device.stream());
  std::vector<float> received = device.download(exchanged, count * size);
  std::vector<std::vector<float>> sent;
  for (int r = 0; r < size; ++r)
    sent.push_back(rankValues(r, count * size));

  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ(averaged[i], bf16ToFloat(floatToBf16(rankSum(size, i) / size)))
        << i;
    EXPECT_EQ(piece[i], static_cast<float>(rankSum(size, rank * count + i)))
        << i;
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(all[r * count + i], rankValues(r, count)[i]);
      EXPECT_EQ(received[r * count + i], sent[r][rank * count + i]);
    }
  }
}

} // namespace
} // namespace megrt::comm
