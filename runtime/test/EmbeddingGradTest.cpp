// The embedding gradient (the embedding_grad library kernel): the CPU
// scatter-add against a naive reference that adds each token's row into its
// id's row in token order, and the CUDA kernels against the CPU, bit for bit.
#include "library/EmbeddingGrad.h"
#include "cpu/ThreadPool.h"
#include "megrt/Error.h"
#include "megrt/HalfFloat.h"

#if MEGRT_WITH_CUDA
#include "TestDevices.h"
#include "cuda/CudaContext.h"
#include "cuda/CudaDriver.h"
#include "cuda/CudaEmbeddingGrad.h"
#include "cuda/CudaEvent.h"
#include "cuda/DeviceMemory.h"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace megrt::test {
namespace {

struct EmbeddingCase {
  const char *name;
  int64_t tokens, vocab, dim;
  /// Ids are drawn from [0, idRange): below vocab leaves rows without
  /// tokens; a few frequent ids make long rows.
  int64_t idRange;
  /// A vocab-parallel block starting at this row (ids outside it add
  /// nothing), or none.
  std::optional<int32_t> firstRow;
  bool wideIds = false;
};

const EmbeddingCase kCases[] = {
    {"small", 16, 32, 8, 32, std::nullopt},
    {"sparse_rows", 300, 1000, 20, 1000, std::nullopt},
    {"repeated_ids", 700, 50, 33, 7, std::nullopt},
    {"i64_ids", 257, 64, 64, 64, std::nullopt, true},
    {"block", 400, 100, 16, 300, 100},
    {"block_first", 400, 100, 16, 300, 0},
    // More tokens than one block of the CUDA rank kernel's tiles, and rows
    // wider than its threads.
    {"many_tokens", 2100, 3000, 300, 3000, std::nullopt},
};

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};

struct Inputs {
  EmbeddingGradShape shape;
  std::vector<uint8_t> grad, ids;
  std::optional<int32_t> firstRow;
};

float toFloat(DType dtype, const uint8_t *bytes, int64_t i) {
  if (dtype == DType::F32) {
    float value;
    std::memcpy(&value, bytes + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + 2 * i, 2);
  return dtype == DType::BF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
}

Inputs randomInputs(const EmbeddingCase &c, DType dtype, unsigned seed) {
  Inputs in;
  in.shape = {c.tokens, c.vocab, c.dim, dtype, c.wideIds};
  in.firstRow = c.firstRow;
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  size_t element = dtype == DType::F32 ? 4 : 2;
  in.grad.resize(c.tokens * c.dim * element);
  for (int64_t i = 0; i < c.tokens * c.dim; ++i) {
    float v = value(random);
    if (dtype == DType::F32) {
      std::memcpy(in.grad.data() + 4 * i, &v, 4);
    } else {
      uint16_t bits = dtype == DType::BF16 ? floatToBf16(v) : floatToF16(v);
      std::memcpy(in.grad.data() + 2 * i, &bits, 2);
    }
  }
  std::uniform_int_distribution<int64_t> id(0, c.idRange - 1);
  std::uniform_int_distribution<int64_t> frequent(0, 2);
  in.ids.resize(c.tokens * (c.wideIds ? 8 : 4));
  for (int64_t t = 0; t < c.tokens; ++t) {
    // A third of the tokens share three ids.
    int64_t chosen = t % 3 == 0 ? frequent(random) : id(random);
    if (c.wideIds)
      std::memcpy(in.ids.data() + 8 * t, &chosen, 8);
    else {
      auto narrow = static_cast<int32_t>(chosen);
      std::memcpy(in.ids.data() + 4 * t, &narrow, 4);
    }
  }
  return in;
}

int64_t idOf(const Inputs &in, int64_t t) {
  if (in.shape.wideIds) {
    int64_t id;
    std::memcpy(&id, in.ids.data() + 8 * t, 8);
    return id;
  }
  int32_t id;
  std::memcpy(&id, in.ids.data() + 4 * t, 4);
  return id;
}

/// The reference: a zero f32 table, each token's row added into its id's
/// row as the tokens come (so each row's sum is in token order, as the
/// command specifies), rounded once at the end; and the same sums in double.
struct Reference {
  std::vector<float> f32;
  std::vector<double> exact;
};

Reference reference(const Inputs &in) {
  const EmbeddingGradShape &s = in.shape;
  Reference ref{std::vector<float>(s.vocab * s.dim, 0.0f),
                std::vector<double>(s.vocab * s.dim, 0.0)};
  int64_t first = in.firstRow.value_or(0);
  for (int64_t t = 0; t < s.tokens; ++t) {
    int64_t row = idOf(in, t) - first;
    if (row < 0 || row >= s.vocab)
      continue;
    for (int64_t d = 0; d < s.dim; ++d) {
      float g = toFloat(s.dtype, in.grad.data(), t * s.dim + d);
      ref.f32[row * s.dim + d] += g;
      ref.exact[row * s.dim + d] += g;
    }
  }
  return ref;
}

std::vector<uint8_t> cpuEmbeddingGrad(const Inputs &in, unsigned threads) {
  const EmbeddingGradShape &s = in.shape;
  ThreadPool pool(threads);
  std::vector<uint8_t> table(s.vocab * s.dim * (s.dtype == DType::F32 ? 4 : 2),
                             0xff);
  std::vector<int32_t> scratch(embeddingGradScratch(s).elements, -7);
  int32_t first = in.firstRow.value_or(0);
  embeddingGrad(pool, s, in.grad.data(), in.ids.data(),
                in.firstRow ? &first : nullptr, table.data(), scratch.data());
  return table;
}

/// The reference's f32 sums rounded as the command rounds them.
std::vector<uint8_t> rounded(const Reference &ref, DType dtype) {
  std::vector<uint8_t> bytes(ref.f32.size() * (dtype == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < ref.f32.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &ref.f32[i], 4);
    } else {
      uint16_t bits = dtype == DType::BF16 ? floatToBf16(ref.f32[i])
                                           : floatToF16(ref.f32[i]);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  }
  return bytes;
}

using CaseParam = std::tuple<EmbeddingCase, DType>;

std::string caseName(const ::testing::TestParamInfo<CaseParam> &info) {
  return std::string(std::get<0>(info.param).name) + "_" +
         dtypeName(std::get<1>(info.param));
}

class EmbeddingGradOnCpu : public ::testing::TestWithParam<CaseParam> {};

TEST_P(EmbeddingGradOnCpu, MatchesTokenOrderReference) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(c, dtype, 1);
  Reference ref = reference(in);
  std::vector<uint8_t> table = cpuEmbeddingGrad(in, 2);
  // Bit for bit what adding the tokens in order gives, rows without
  // tokens zero.
  EXPECT_EQ(table, rounded(ref, dtype));
  // And within one rounding of the exact sums, relative to the largest.
  double largest = 0, worst = 0;
  for (double v : ref.exact)
    largest = std::max(largest, std::abs(v));
  for (size_t i = 0; i < ref.exact.size(); ++i)
    worst = std::max(worst,
                     std::abs(toFloat(dtype, table.data(), i) - ref.exact[i]));
  double tolerance = dtype == DType::F32    ? 1e-5
                     : dtype == DType::BF16 ? 1e-2
                                            : 2e-3;
  EXPECT_LE(worst, tolerance * std::max(largest, 1.0))
      << describeEmbeddingGrad(in.shape);
}

TEST_P(EmbeddingGradOnCpu, SameBitsForAnyNumberOfThreads) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(c, dtype, 2);
  std::vector<uint8_t> one = cpuEmbeddingGrad(in, 1);
  EXPECT_EQ(cpuEmbeddingGrad(in, 2), one);
  EXPECT_EQ(cpuEmbeddingGrad(in, 3), one);
}

INSTANTIATE_TEST_SUITE_P(EmbeddingGrad, EmbeddingGradOnCpu,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(kDTypes)),
                         caseName);

TEST(EmbeddingGradScratchLayout, PartsFollowEachOther) {
  EmbeddingGradScratch layout =
      embeddingGradScratch({10, 100, 8, DType::F32, false});
  EXPECT_EQ(layout.offsets, 0);
  EXPECT_EQ(layout.ranks, 101);
  EXPECT_EQ(layout.order, 111);
  EXPECT_EQ(layout.elements, 121);
}

#if MEGRT_WITH_CUDA

struct CudaState {
  CudaContext context{0};
  CudaEmbeddingGrad kernels{context};
};

/// Made on first use and never destroyed: at exit the driver may already
/// be tearing down.
CudaState &cudaState() {
  static CudaState *state = new CudaState();
  return *state;
}

std::string cudaUnavailable() {
  return cudaKernelsUnavailable([] { cudaState(); });
}

DeviceMemory upload(const void *bytes, size_t size) {
  DeviceMemory memory(size, "embedding gradient test tensor");
  CudaState &cuda = cudaState();
  checkCuda(cudaDriver().cuMemcpyHtoDAsync(memory.get(), bytes, size,
                                           cuda.context.stream()),
            "cuMemcpyHtoDAsync", "embedding gradient test upload");
  cuda.context.synchronize("embedding gradient test upload");
  return memory;
}

std::vector<uint8_t> download(const DeviceMemory &memory, size_t size) {
  std::vector<uint8_t> bytes(size);
  CudaState &cuda = cudaState();
  checkCuda(cudaDriver().cuMemcpyDtoHAsync(bytes.data(), memory.get(), size,
                                           cuda.context.stream()),
            "cuMemcpyDtoHAsync", "embedding gradient test download");
  cuda.context.synchronize("embedding gradient test download");
  return bytes;
}

/// The tensors of one call on the device.
struct DeviceCall {
  DeviceMemory grad, ids, first, table, scratch;
  size_t tableBytes;

  explicit DeviceCall(const Inputs &in)
      : grad(upload(in.grad.data(), in.grad.size())),
        ids(upload(in.ids.data(), in.ids.size())),
        first(in.firstRow ? upload(&*in.firstRow, 4) : DeviceMemory()),
        table(tableBytesOf(in.shape), "embedding gradient test table"),
        scratch(embeddingGradScratch(in.shape).elements * 4,
                "embedding gradient test scratch"),
        tableBytes(tableBytesOf(in.shape)) {}

  static size_t tableBytesOf(const EmbeddingGradShape &s) {
    return s.vocab * s.dim * (s.dtype == DType::F32 ? 4 : 2);
  }

  void run(const EmbeddingGradShape &shape) {
    CudaState &cuda = cudaState();
    cuda.kernels.run(shape, grad.get(), ids.get(), first.get(), table.get(),
                     scratch.get(), cuda.context.stream());
  }
};

class EmbeddingGradOnCuda : public ::testing::TestWithParam<CaseParam> {
protected:
  void SetUp() override {
    std::string reason = cudaUnavailable();
    if (!reason.empty())
      GTEST_SKIP() << "CUDA unavailable: " << reason;
  }
};

TEST_P(EmbeddingGradOnCuda, MatchesCpuBitForBit) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(c, dtype, 3);
  DeviceCall call(in);
  call.run(in.shape);
  cudaState().context.synchronize("embedding gradient test");
  EXPECT_EQ(download(call.table, call.tableBytes), cpuEmbeddingGrad(in, 2))
      << describeEmbeddingGrad(in.shape);
  // A second run over the same scratch gives the same table.
  call.run(in.shape);
  cudaState().context.synchronize("embedding gradient test");
  EXPECT_EQ(download(call.table, call.tableBytes), cpuEmbeddingGrad(in, 1));
}

INSTANTIATE_TEST_SUITE_P(EmbeddingGrad, EmbeddingGradOnCuda,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(kDTypes)),
                         caseName);

/// The Llama-3 shape of the issue (4096 tokens into a 128256 x 4096 bf16
/// table): device time and the bandwidth of reading the gradient once and
/// writing the table once.
TEST(EmbeddingGradCuda, Llama3ShapeReportsBandwidth) {
  std::string reason = cudaUnavailable();
  if (!reason.empty())
    GTEST_SKIP() << "CUDA unavailable: " << reason;
  EmbeddingCase c{"llama3", 4096, 128256, 4096, 128256, std::nullopt};
  Inputs in = randomInputs(c, DType::BF16, 4);
  DeviceCall call(in);
  CudaState &cuda = cudaState();
  CudaEvent start("embedding gradient test start"),
      stop("embedding gradient test stop");
  call.run(in.shape);
  constexpr int kRuns = 5;
  start.record(cuda.context.stream(), "embedding gradient timing");
  for (int i = 0; i < kRuns; ++i)
    call.run(in.shape);
  stop.record(cuda.context.stream(), "embedding gradient timing");
  cuda.context.synchronize("embedding gradient timing");
  double ms =
      CudaEvent::elapsedMs(start, stop, "embedding gradient timing") / kRuns;
  double bytes = static_cast<double>(in.grad.size() + call.tableBytes);
  std::printf(
      "[ timing   ] embedding_grad bf16 T=4096 V=128256 D=4096: %.3f ms, "
      "%.0f GB/s (gradient read and table written once)\n",
      ms, bytes / ms / 1e6);
  std::vector<uint8_t> table = download(call.table, call.tableBytes);
  EXPECT_EQ(table, cpuEmbeddingGrad(in, 2));
}

#endif

} // namespace
} // namespace megrt::test
