// A CUDA group of one rank still runs NCCL (a communicator of its own), so
// that the NCCL path is exercised on a single GPU; skipped without one.
#include "comm/Communicator.h"

#include "CudaTestDevice.h"
#include "RankValues.h"
#include "ScopedEnvironment.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace megrt::comm {
namespace {

using test::CudaTestDevice;
using test::fromBf16;
using test::rankValues;
using test::toBf16;

TEST(NcclGroupTest, GroupOfOneOnOneGpu) {
  if (std::optional<std::string> reason = test::cudaUnavailable(1))
    GTEST_SKIP() << *reason;
  test::ScopedEnvironment env;
  env.clearLauncher();
  CudaTestDevice device(0);
  std::unique_ptr<Group> group = connectWorld().split(0, 0, MemorySpace::Cuda);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);

  const size_t count = 1000;
  std::vector<float> values = rankValues(2, count);
  float *f32 = device.upload(values);
  float *f32Out = device.allocate<float>(count);
  uint16_t *bf16 = device.upload(toBf16(values));
  uint16_t *bf16Out = device.allocate<uint16_t>(count);
  // Two collectives in flight, waited for in the other order.
  uint64_t first = group->start(CollectiveKind::AllReduce, f32, f32Out, count,
                                DType::F32, ReduceOp::Avg, device.stream());
  uint64_t second =
      group->start(CollectiveKind::AllGather, bf16, bf16Out, count, DType::BF16,
                   ReduceOp::Sum, device.stream());
  group->wait(second);
  group->wait(first);
  EXPECT_EQ(device.download(f32Out, count), values);
  EXPECT_EQ(fromBf16(device.download(bf16Out, count)), values);

  group->run(CollectiveKind::ReduceScatter, bf16, bf16, count, DType::BF16,
             ReduceOp::Sum, device.stream());
  EXPECT_EQ(fromBf16(device.download(bf16, count)), values);

  // An all-to-all of one rank (grouped send and receive to itself) copies.
  float *exchanged = device.allocate<float>(count);
  group->run(CollectiveKind::AllToAll, f32, exchanged, count, DType::F32,
             ReduceOp::Sum, device.stream());
  EXPECT_EQ(device.download(exchanged, count), values);

  // A pipeline's point-to-point exchange (ncclSend and ncclRecv in one
  // group call), here with itself: what was sent arrives.
  float *received = device.allocate<float>(count);
  uint64_t exchange = group->startExchange(f32, 0, received, 0, count,
                                           DType::F32, device.stream());
  group->wait(exchange);
  EXPECT_EQ(device.download(received, count), values);

  // A pipeline gap's batch (two sends and their receives in one NCCL group
  // call, as the pipeline's send and recv commands issue them), here with
  // itself: each receive gets its send's elements, in order.
  float *firstIn = device.allocate<float>(count);
  float *secondIn = device.allocate<float>(count / 2);
  std::vector<uint64_t> handles = group->startTransfers(
      {{f32, nullptr, 0, count, DType::F32},
       {f32 + count / 2, nullptr, 0, count / 2, DType::F32},
       {nullptr, firstIn, 0, count, DType::F32},
       {nullptr, secondIn, 0, count / 2, DType::F32}},
      device.stream());
  ASSERT_EQ(handles.size(), 4u);
  std::vector<uint64_t> waited;
  for (uint64_t handle : handles)
    if (std::find(waited.begin(), waited.end(), handle) == waited.end()) {
      group->wait(handle);
      waited.push_back(handle);
    }
  EXPECT_EQ(device.download(firstIn, count), values);
  EXPECT_EQ(device.download(secondIn, count / 2),
            std::vector<float>(values.begin() + count / 2, values.end()));
}

} // namespace
} // namespace megrt::comm
