// Fused attention: the CPU implementation against a naive double-precision
// reference, and the CUDA kernels against the CPU implementation.
#include "AttentionShape.h"
#include "Fail.h"
#include "cpu/CpuAttention.h"
#include "cpu/ThreadPool.h"
#include "megrt/Error.h"
#include "megrt/HalfFloat.h"

#if MEGRT_WITH_CUDA
#include "TestDevices.h"
#include "cuda/CudaAttention.h"
#include "cuda/CudaContext.h"
#include "cuda/CudaDriver.h"
#include "cuda/CudaEvent.h"
#include "cuda/CudnnAttention.h"
#include "cuda/DeviceMemory.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace megrt::test {
namespace {

struct AttentionCase {
  const char *name;
  int64_t batch, seqQ, seqKv, heads, kvHeads, headDim, valueDim;
  bool causal;
  /// scale = scaleFactor / sqrt(headDim); large factors make the softmax
  /// peaked, which stresses the running maximum.
  float scaleFactor = 1.0f;
  /// On CUDA, every tensor starts one element past an aligned address,
  /// which rules out the kernels' 4-element accesses.
  bool offsetTensors = false;
};

// Sequence lengths are mostly not multiples of the 64-row (32 for d256)
// tiles; tiers are 64, 128 and 256 on CUDA.
const AttentionCase kCases[] = {
    {"mha", 2, 77, 77, 4, 4, 64, 64, false},
    {"mha_causal", 2, 77, 77, 4, 4, 64, 64, true},
    {"gqa2_causal", 1, 100, 100, 4, 2, 64, 64, true},
    {"mqa", 2, 65, 65, 4, 1, 128, 128, false},
    {"mqa_causal", 1, 129, 129, 4, 1, 128, 128, true},
    {"fewer_queries_causal_d96", 1, 37, 150, 4, 2, 96, 96, true},
    {"fewer_queries", 1, 37, 150, 2, 2, 64, 64, false},
    {"more_queries_causal", 1, 150, 37, 4, 2, 64, 64, true},
    {"one_query_causal", 2, 1, 130, 4, 2, 64, 64, true},
    {"dv_wider", 1, 70, 70, 4, 2, 64, 128, true},
    {"dv_narrower", 1, 70, 91, 2, 1, 128, 64, false},
    {"odd_dims", 1, 45, 45, 2, 1, 6, 10, true},
    {"d256_causal", 1, 70, 70, 4, 2, 256, 256, true},
    {"d200_dv160", 1, 33, 70, 2, 2, 200, 160, false},
    {"peaked_causal", 1, 90, 90, 2, 2, 64, 64, true, 8.0f},
    {"unaligned_causal", 1, 70, 70, 4, 2, 64, 64, true, 1.0f, true},
    {"single", 1, 1, 1, 1, 1, 64, 64, true},
    // More keys than one block of the CPU's tiles, and a partial last one.
    {"key_blocks_causal", 1, 300, 300, 2, 1, 64, 64, true},
    {"key_blocks", 1, 70, 520, 2, 2, 32, 32, false},
};

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};

/// Error bound, relative to the largest reference value, for each dtype:
/// f32 math on every dtype, one rounding of each output.
double toleranceOf(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return 1e-2;
  case DType::F16:
    return 2e-3;
  default:
    return 1e-5;
  }
}

/// The bytes of a tensor of `dtype`.
using Bytes = std::vector<uint8_t>;

std::vector<float> widen(DType dtype, const Bytes &bytes) {
  size_t count = bytes.size() / elementSize(dtype);
  std::vector<float> values(count);
  if (dtype == DType::F32) {
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    values[i] = dtype == DType::BF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
  }
  return values;
}

/// `count` values uniform in [-range, range], rounded to `dtype`.
Bytes randomTensor(DType dtype, int64_t count, float range,
                   std::mt19937_64 &random) {
  std::uniform_real_distribution<float> uniform(-range, range);
  Bytes bytes(count * elementSize(dtype));
  for (int64_t i = 0; i < count; ++i) {
    float value = uniform(random);
    if (dtype == DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &value, 4);
      continue;
    }
    uint16_t bits =
        dtype == DType::BF16 ? floatToBf16(value) : floatToF16(value);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

int64_t queryElements(const AttentionShape &s) {
  return s.batch * s.seqQ * s.heads * s.headDim;
}
int64_t keyElements(const AttentionShape &s) {
  return s.batch * s.seqKv * s.kvHeads * s.headDim;
}
int64_t valueElements(const AttentionShape &s) {
  return s.batch * s.seqKv * s.kvHeads * s.valueDim;
}
int64_t outputElements(const AttentionShape &s) {
  return s.batch * s.seqQ * s.heads * s.valueDim;
}

/// The inputs of a forward and backward call.
struct Inputs {
  AttentionShape shape;
  Bytes q, k, v, dout;
  /// Each query's position in the key sequence; empty: the end-aligned
  /// default.
  std::vector<int32_t> positions = {};
};

Inputs randomInputs(const AttentionShape &shape, uint64_t seed) {
  std::mt19937_64 random(seed);
  Inputs in{shape, {}, {}, {}, {}};
  in.q = randomTensor(shape.dtype, queryElements(shape), 2.0f, random);
  in.k = randomTensor(shape.dtype, keyElements(shape), 1.0f, random);
  in.v = randomTensor(shape.dtype, valueElements(shape), 1.0f, random);
  in.dout = randomTensor(shape.dtype, outputElements(shape), 1.0f, random);
  return in;
}

AttentionShape shapeOf(const AttentionCase &c, DType dtype) {
  float scale =
      static_cast<float>(c.scaleFactor / std::sqrt(double(c.headDim)));
  return {c.batch,   c.seqQ,     c.seqKv,  c.heads, c.kvHeads,
          c.headDim, c.valueDim, c.causal, scale,   dtype};
}

/// The inputs in f32, for the reference.
struct Values {
  std::vector<float> q, k, v, dout;
  explicit Values(const Inputs &in)
      : q(widen(in.shape.dtype, in.q)), k(widen(in.shape.dtype, in.k)),
        v(widen(in.shape.dtype, in.v)), dout(widen(in.shape.dtype, in.dout)) {}
};

int64_t visibleKeys(const Inputs &in, int64_t i) {
  const AttentionShape &s = in.shape;
  if (!s.causal)
    return s.seqKv;
  int64_t position =
      in.positions.empty() ? i + s.seqKv - s.seqQ : in.positions[i];
  return std::clamp<int64_t>(position + 1, 0, s.seqKv);
}

/// One query row of attention in double precision, from its definition:
/// probabilities p over the visible keys (a prefix), out = p v, and for the
/// backward dS = p * (dout . v_j - sum_j p_j dout . v_j) and dq = scale * dS
/// k, and the row's log-sum-exp of its scaled scores. A row that sees no
/// key has out = 0, no gradient and log-sum-exp +inf.
struct RowReference {
  std::vector<double> out, dq, probs, ds;
  double lse = INFINITY;
};

RowReference referenceRow(const Inputs &inputs, const Values &in, int64_t b,
                          int64_t h, int64_t i) {
  const AttentionShape &s = inputs.shape;
  const int64_t g = h / (s.heads / s.kvHeads);
  const int64_t visible = visibleKeys(inputs, i);
  const float *q = &in.q[((b * s.seqQ + i) * s.heads + h) * s.headDim];
  const float *dout = &in.dout[((b * s.seqQ + i) * s.heads + h) * s.valueDim];
  auto key = [&](int64_t j) {
    return &in.k[((b * s.seqKv + j) * s.kvHeads + g) * s.headDim];
  };
  auto value = [&](int64_t j) {
    return &in.v[((b * s.seqKv + j) * s.kvHeads + g) * s.valueDim];
  };
  RowReference row{std::vector<double>(s.valueDim, 0.0),
                   std::vector<double>(s.headDim, 0.0),
                   std::vector<double>(visible), std::vector<double>(visible)};
  if (visible == 0)
    return row;
  double max = -INFINITY;
  for (int64_t j = 0; j < visible; ++j) {
    double score = 0.0;
    for (int64_t d = 0; d < s.headDim; ++d)
      score += double(q[d]) * key(j)[d];
    row.probs[j] = score * s.scale;
    max = std::max(max, row.probs[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < visible; ++j)
    sum += row.probs[j] = std::exp(row.probs[j] - max);
  row.lse = max + std::log(sum);
  std::vector<double> dp(visible);
  double delta = 0.0;
  for (int64_t j = 0; j < visible; ++j) {
    row.probs[j] /= sum;
    double dot = 0.0;
    for (int64_t n = 0; n < s.valueDim; ++n) {
      row.out[n] += row.probs[j] * value(j)[n];
      dot += double(dout[n]) * value(j)[n];
    }
    dp[j] = dot;
    delta += row.probs[j] * dot;
  }
  for (int64_t j = 0; j < visible; ++j) {
    row.ds[j] = row.probs[j] * (dp[j] - delta);
    for (int64_t d = 0; d < s.headDim; ++d)
      row.dq[d] += s.scale * row.ds[j] * key(j)[d];
  }
  return row;
}

struct Reference {
  std::vector<double> out, dq, dk, dv;
  /// [batch][heads][seqQ].
  std::vector<double> lse;
};

Reference referenceAttention(const Inputs &inputs) {
  const AttentionShape &s = inputs.shape;
  Values in(inputs);
  Reference ref{std::vector<double>(outputElements(s)),
                std::vector<double>(queryElements(s)),
                std::vector<double>(keyElements(s)),
                std::vector<double>(valueElements(s)),
                std::vector<double>(s.batch * s.heads * s.seqQ)};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seqQ; ++i) {
        RowReference row = referenceRow(inputs, in, b, h, i);
        ref.lse[(b * s.heads + h) * s.seqQ + i] = row.lse;
        int64_t g = h / (s.heads / s.kvHeads);
        int64_t rowIndex = (b * s.seqQ + i) * s.heads + h;
        std::copy(row.out.begin(), row.out.end(),
                  ref.out.begin() + rowIndex * s.valueDim);
        std::copy(row.dq.begin(), row.dq.end(),
                  ref.dq.begin() + rowIndex * s.headDim);
        const float *q = &in.q[rowIndex * s.headDim];
        const float *dout = &in.dout[rowIndex * s.valueDim];
        for (size_t j = 0; j < row.probs.size(); ++j) {
          int64_t kvRow = (b * s.seqKv + j) * s.kvHeads + g;
          for (int64_t d = 0; d < s.headDim; ++d)
            ref.dk[kvRow * s.headDim + d] += s.scale * row.ds[j] * q[d];
          for (int64_t n = 0; n < s.valueDim; ++n)
            ref.dv[kvRow * s.valueDim + n] += row.probs[j] * dout[n];
        }
      }
  return ref;
}

/// Magnitude below which errors are bounded absolutely rather than relative
/// to the reference (inputs are of order 1): a gradient that is zero in exact
/// arithmetic, as with a single visible key, comes out as rounding noise.
constexpr double kMagnitudeFloor = 0.1;

/// Both the L2 norm and the largest element of the error must be within
/// `tolerance` of the reference's.
void expectClose(const std::vector<float> &actual,
                 const std::vector<double> &expected, double tolerance,
                 const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double errorSq = 0.0, referenceSq = 0.0, maxError = 0.0, maxReference = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::abs(actual[i] - expected[i]);
    // A NaN must fail, so it counts as the worst error.
    if (!(error <= maxError)) {
      maxError = error;
      worst = i;
    }
    errorSq += error * error;
    referenceSq += expected[i] * expected[i];
    maxReference = std::max(maxReference, std::abs(expected[i]));
  }
  double floorNorm = kMagnitudeFloor * std::sqrt(double(actual.size()));
  EXPECT_LE(std::sqrt(errorSq),
            tolerance * std::max(std::sqrt(referenceSq), floorNorm))
      << what << ": relative L2 error";
  EXPECT_LE(maxError, tolerance * std::max(maxReference, kMagnitudeFloor))
      << what << ": element " << worst << " is " << actual[worst]
      << ", expected " << expected[worst];
}

/// Outputs of the CPU implementation; `stats` are the forward's softmax
/// statistics where it was asked for them.
struct Results {
  Bytes out, dq, dk, dv;
  std::vector<float> stats;
};

int64_t statsElements(const AttentionShape &s) {
  return s.batch * s.heads * s.seqQ;
}

/// Whether the forward hands its softmax statistics to the backward, or
/// the backward recomputes them.
enum class Stats { Recomputed, Kept };

Results cpuAttention(const Inputs &in, unsigned threads = 3,
                     Stats stats = Stats::Recomputed) {
  const AttentionShape &s = in.shape;
  ThreadPool pool(threads);
  size_t element = elementSize(s.dtype);
  Results r{Bytes(outputElements(s) * element),
            Bytes(queryElements(s) * element), Bytes(keyElements(s) * element),
            Bytes(valueElements(s) * element)};
  if (stats == Stats::Kept)
    r.stats.assign(statsElements(s), NAN);
  float *kept = stats == Stats::Kept ? r.stats.data() : nullptr;
  const int32_t *positions =
      in.positions.empty() ? nullptr : in.positions.data();
  attentionForward(pool, s, in.q.data(), in.k.data(), in.v.data(), r.out.data(),
                   kept, positions);
  attentionBackward(pool, s, in.dout.data(), in.q.data(), in.k.data(),
                    in.v.data(), r.out.data(), kept, r.dq.data(), r.dk.data(),
                    r.dv.data(), positions);
  return r;
}

/// Softmax statistics within `tolerance` of `expected`, relative to their
/// magnitude (at least 1); rows without keys +inf in both.
void expectStatsClose(const std::vector<float> &actual,
                      const std::vector<double> &expected, double tolerance,
                      const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], INFINITY) << what << " row " << i;
      continue;
    }
    EXPECT_NEAR(actual[i], expected[i],
                tolerance * std::max(1.0, std::abs(expected[i])))
        << what << " row " << i;
  }
}

/// One case in one dtype.
struct CaseParam {
  AttentionCase c;
  DType dtype;
};

std::vector<CaseParam> allCases() {
  std::vector<CaseParam> params;
  for (const AttentionCase &c : kCases)
    for (DType dtype : kDTypes)
      params.push_back({c, dtype});
  return params;
}

std::string caseName(const ::testing::TestParamInfo<CaseParam> &info) {
  return std::string(info.param.c.name) + "_" + dtypeName(info.param.dtype);
}

void PrintTo(const CaseParam &param, std::ostream *os) {
  *os << param.c.name << " " << dtypeName(param.dtype);
}

// --- CPU ---------------------------------------------------------------------

class AttentionOnCpu : public ::testing::TestWithParam<CaseParam> {};

TEST_P(AttentionOnCpu, MatchesReference) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(shapeOf(c, dtype), 1);
  Reference ref = referenceAttention(in);
  Results r = cpuAttention(in);
  double tolerance = toleranceOf(dtype);
  std::string what = describeAttention(in.shape);
  expectClose(widen(dtype, r.out), ref.out, tolerance, what + " out");
  expectClose(widen(dtype, r.dq), ref.dq, tolerance, what + " dq");
  expectClose(widen(dtype, r.dk), ref.dk, tolerance, what + " dk");
  expectClose(widen(dtype, r.dv), ref.dv, tolerance, what + " dv");
}

TEST_P(AttentionOnCpu, SameBitsForAnyNumberOfThreads) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(shapeOf(c, dtype), 1);
  Results one = cpuAttention(in, 1);
  for (unsigned threads : {2u, 5u}) {
    Results many = cpuAttention(in, threads);
    EXPECT_EQ(one.out, many.out) << threads << " threads";
    EXPECT_EQ(one.dq, many.dq) << threads << " threads";
    EXPECT_EQ(one.dk, many.dk) << threads << " threads";
    EXPECT_EQ(one.dv, many.dv) << threads << " threads";
  }
}

// The statistics are the forward's f32 sums of the same scores: close to
// the double-precision log-sum-exp whatever the dtype of the inputs.
constexpr double kStatsTolerance = 1e-5;

TEST_P(AttentionOnCpu, ForwardStatsAreTheLogSumExp) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(shapeOf(c, dtype), 1);
  Reference ref = referenceAttention(in);
  Results r = cpuAttention(in, 3, Stats::Kept);
  expectStatsClose(r.stats, ref.lse, kStatsTolerance,
                   describeAttention(in.shape) + " stats");
}

/// The queries of rank `rank` of a context-parallel group of `ranks` over
/// a causal sequence of `2 * ranks * chunk` keys: chunks rank and
/// 2 * ranks - 1 - rank, with their positions.
std::vector<int32_t> contextParallelPositions(int64_t ranks, int64_t rank,
                                              int64_t chunk) {
  std::vector<int32_t> positions;
  for (int64_t c : {rank, 2 * ranks - 1 - rank})
    for (int64_t i = 0; i < chunk; ++i)
      positions.push_back(static_cast<int32_t>(c * chunk + i));
  return positions;
}

/// `in` (with its query positions) forward and backward on the CPU, with
/// and without kept statistics, against the double-precision reference.
void expectPositionsMatchReference(const Inputs &in, DType dtype,
                                   const std::string &what) {
  Reference ref = referenceAttention(in);
  Results r = cpuAttention(in);
  Results kept = cpuAttention(in, 2, Stats::Kept);
  double tolerance = toleranceOf(dtype);
  expectClose(widen(dtype, r.out), ref.out, tolerance, what + " out");
  expectClose(widen(dtype, r.dq), ref.dq, tolerance, what + " dq");
  expectClose(widen(dtype, r.dk), ref.dk, tolerance, what + " dk");
  expectClose(widen(dtype, r.dv), ref.dv, tolerance, what + " dv");
  expectStatsClose(kept.stats, ref.lse, kStatsTolerance, what + " stats");
  EXPECT_EQ(kept.dq, r.dq) << what;
}

// A context-parallel rank's queries (two chunks, 100 rows, so that a
// 64-row tile holds both) against every key: each sees the keys up to its
// position.
TEST(AttentionPositionsOnCpu, ContextParallelChunksMatchReference) {
  for (DType dtype : kDTypes)
    for (int64_t rank : {0, 1, 3}) {
      AttentionCase c{"cp", 2, 100, 400, 4, 2, 64, 64, true};
      Inputs in = randomInputs(shapeOf(c, dtype), 3 + rank);
      in.positions = contextParallelPositions(4, rank, 50);
      expectPositionsMatchReference(in, dtype,
                                    describeAttention(in.shape) +
                                        " positions of rank " +
                                        std::to_string(rank));
    }
}

/// The positions of a ring attention's step on a rank holding two chunks
/// of `chunk` queries against a block of two chunks of keys: a block of an
/// earlier rank is seen through its first chunk by every query, one of a
/// later rank whole by the second query chunk only, the first seeing no key
/// (-1).
std::vector<int32_t> ringBlockPositions(bool laterRank, int64_t chunk) {
  std::vector<int32_t> positions;
  for (int64_t i = 0; i < 2 * chunk; ++i)
    positions.push_back(static_cast<int32_t>(!laterRank  ? chunk - 1
                                             : i < chunk ? -1
                                                         : 2 * chunk - 1));
  return positions;
}

// A ring step's block: queries that see no key have a zero result, no
// gradient and statistics +inf; the others see their prefix.
TEST(AttentionPositionsOnCpu, RingBlockPositionsMatchReference) {
  for (DType dtype : kDTypes)
    for (bool laterRank : {false, true}) {
      AttentionCase c{"ring", 2, 100, 100, 4, 2, 64, 64, true};
      Inputs in = randomInputs(shapeOf(c, dtype), 17 + laterRank);
      in.positions = ringBlockPositions(laterRank, 50);
      expectPositionsMatchReference(in, dtype,
                                    describeAttention(in.shape) +
                                        (laterRank
                                             ? " block of a later rank"
                                             : " block of an earlier rank"));
    }
}

// Positions that place every query where the default does give the same
// bits.
TEST(AttentionPositionsOnCpu, DefaultPositionsAreTheSameBits) {
  AttentionCase c{"fewer_queries_causal", 1, 70, 300, 4, 2, 64, 64, true};
  Inputs in = randomInputs(shapeOf(c, DType::BF16), 5);
  Results plain = cpuAttention(in);
  for (int64_t i = 0; i < c.seqQ; ++i)
    in.positions.push_back(static_cast<int32_t>(i + c.seqKv - c.seqQ));
  Results placed = cpuAttention(in);
  EXPECT_EQ(plain.out, placed.out);
  EXPECT_EQ(plain.dq, placed.dq);
  EXPECT_EQ(plain.dk, placed.dk);
  EXPECT_EQ(plain.dv, placed.dv);
}

TEST(AttentionPositionsOnCpu, DecreasingPositionsAreRefused) {
  AttentionCase c{"cp", 1, 4, 8, 1, 1, 8, 8, true};
  Inputs in = randomInputs(shapeOf(c, DType::F32), 7);
  in.positions = {0, 1, 6, 5};
  try {
    cpuAttention(in);
    FAIL() << "decreasing positions were accepted";
  } catch (const Error &error) {
    EXPECT_NE(
        std::string(error.what())
            .find("query positions must not decrease, but query 3 is at 5 "
                  "after 6"),
        std::string::npos)
        << error.what();
  }
}

TEST_P(AttentionOnCpu, BackwardGivenStatsIsTheSameBits) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(shapeOf(c, dtype), 1);
  Results recomputed = cpuAttention(in, 2, Stats::Recomputed);
  Results kept = cpuAttention(in, 3, Stats::Kept);
  EXPECT_EQ(recomputed.out, kept.out);
  EXPECT_EQ(recomputed.dq, kept.dq);
  EXPECT_EQ(recomputed.dk, kept.dk);
  EXPECT_EQ(recomputed.dv, kept.dv);
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionOnCpu,
                         ::testing::ValuesIn(allCases()), caseName);

TEST(AttentionShapeCheck, RejectsBadShapes) {
  AttentionShape shape{1, 4, 4, 3, 2, 8, 8, false, 1.0f, DType::F32};
  std::vector<float> t(64);
  ThreadPool pool(1);
  try {
    attentionForward(pool, shape, t.data(), t.data(), t.data(), t.data());
    FAIL() << "H=3 with Hkv=2 was accepted";
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(), "attention f32 B=1 Sq=4 Skv=4 H=3 Hkv=2 D=8 "
                               "Dv=8: H=3 must be a multiple of Hkv=2");
  }
  shape.heads = 2;
  shape.dtype = DType::I32;
  EXPECT_THROW(
      attentionForward(pool, shape, t.data(), t.data(), t.data(), t.data()),
      Error);
}

// --- CUDA --------------------------------------------------------------------

#if MEGRT_WITH_CUDA

void expectClose(const std::vector<float> &actual,
                 const std::vector<float> &expected, double tolerance,
                 const std::string &what) {
  expectClose(actual, std::vector<double>(expected.begin(), expected.end()),
              tolerance, what);
}

/// The context and attention module shared by the CUDA tests, made on first
/// use and never destroyed: at exit the driver may already be tearing down.
struct CudaState {
  CudaContext context{0};
  CudaAttention attention{context};
};

CudaState &cudaState() {
  static CudaState *state = new CudaState();
  return *state;
}

/// Device memory for one tensor, `offset` bytes into its allocation.
struct DeviceTensor {
  DeviceMemory memory;
  CUdeviceptr address;
  size_t bytes;

  DeviceTensor(size_t bytes, size_t offset)
      : memory(bytes + offset, "attention test tensor"),
        address(memory.get() + offset), bytes(bytes) {}
};

DeviceTensor upload(const Bytes &bytes, size_t offset) {
  DeviceTensor tensor(bytes.size(), offset);
  CudaState &cuda = cudaState();
  checkCuda(cudaDriver().cuMemcpyHtoDAsync(tensor.address, bytes.data(),
                                           bytes.size(), cuda.context.stream()),
            "cuMemcpyHtoDAsync", "attention test upload");
  cuda.context.synchronize("attention test upload");
  return tensor;
}

Bytes download(const DeviceTensor &tensor) {
  Bytes bytes(tensor.bytes);
  CudaState &cuda = cudaState();
  checkCuda(cudaDriver().cuMemcpyDtoHAsync(bytes.data(), tensor.address,
                                           bytes.size(), cuda.context.stream()),
            "cuMemcpyDtoHAsync", "attention test download");
  cuda.context.synchronize("attention test download");
  return bytes;
}

/// The tensors of one forward and backward call on the device; with
/// Stats::Kept the forward writes the softmax statistics to `stats` and the
/// backward reads them there.
struct DeviceCall {
  DeviceTensor q, k, v, dout, out, dq, dk, dv, scratch, stats;
  Stats mode;
  /// The queries' positions when the inputs give them.
  std::optional<DeviceTensor> positions;

  DeviceCall(const Inputs &in, size_t offset, Stats mode = Stats::Recomputed)
      : q(upload(in.q, offset)), k(upload(in.k, offset)),
        v(upload(in.v, offset)), dout(upload(in.dout, offset)),
        out(outputElements(in.shape) * elementSize(in.shape.dtype), offset),
        dq(in.q.size(), offset), dk(in.k.size(), offset),
        dv(in.v.size(), offset),
        scratch(CudaAttention::backwardScratchBytes(in.shape), 0),
        stats(statsElements(in.shape) * sizeof(float), 0), mode(mode) {
    if (!in.positions.empty()) {
      Bytes bytes(in.positions.size() * sizeof(int32_t));
      std::memcpy(bytes.data(), in.positions.data(), bytes.size());
      positions.emplace(upload(bytes, 0));
    }
  }

  CUdeviceptr positionsAddress() const {
    return positions ? positions->address : 0;
  }

  CUdeviceptr statsAddress() const {
    return mode == Stats::Kept ? stats.address : 0;
  }

  void forward(const AttentionShape &shape) {
    CudaState &cuda = cudaState();
    cuda.attention.forward(shape, q.address, k.address, v.address, out.address,
                           statsAddress(), positionsAddress(),
                           cuda.context.stream());
  }

  void backward(const AttentionShape &shape) {
    CudaState &cuda = cudaState();
    cuda.attention.backward(
        shape, dout.address, q.address, k.address, v.address, out.address,
        statsAddress(), dq.address, dk.address, dv.address, positionsAddress(),
        scratch.address, scratch.bytes, cuda.context.stream());
  }
};

std::vector<float> downloadFloats(const DeviceTensor &tensor) {
  Bytes bytes = download(tensor);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

Bytes floatBytes(const std::vector<float> &values) {
  Bytes bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// Why the CUDA tests cannot run here, or empty.
std::string cudaUnavailable() {
  return cudaKernelsUnavailable([] { cudaState(); });
}

class AttentionOnCuda : public ::testing::TestWithParam<CaseParam> {
protected:
  void SetUp() override {
    std::string reason = cudaUnavailable();
    if (!reason.empty())
      GTEST_SKIP() << "CUDA unavailable: " << reason;
  }
};

TEST_P(AttentionOnCuda, MatchesCpu) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(shapeOf(c, dtype), 2);
  Results cpu = cpuAttention(in);
  size_t offset = c.offsetTensors ? elementSize(dtype) : 0;
  DeviceCall call(in, offset);
  call.forward(in.shape);
  Bytes out = download(call.out);
  // The backward gets the CPU's forward output, so that both backwards see
  // the same inputs.
  call.out = upload(cpu.out, offset);
  call.backward(in.shape);
  double tolerance = toleranceOf(dtype);
  std::string what = describeAttention(in.shape) + " on CUDA";
  expectClose(widen(dtype, out), widen(dtype, cpu.out), tolerance,
              what + " out");
  expectClose(widen(dtype, download(call.dq)), widen(dtype, cpu.dq), tolerance,
              what + " dq");
  expectClose(widen(dtype, download(call.dk)), widen(dtype, cpu.dk), tolerance,
              what + " dk");
  expectClose(widen(dtype, download(call.dv)), widen(dtype, cpu.dv), tolerance,
              what + " dv");
}

/// `values` as doubles, for expectStatsClose.
std::vector<double> toDoubles(const std::vector<float> &values) {
  return std::vector<double>(values.begin(), values.end());
}

TEST_P(AttentionOnCuda, KeptStatsMatchCpu) {
  const auto &[c, dtype] = GetParam();
  Inputs in = randomInputs(shapeOf(c, dtype), 2);
  Results cpu = cpuAttention(in, 3, Stats::Kept);
  size_t offset = c.offsetTensors ? elementSize(dtype) : 0;
  DeviceCall call(in, offset, Stats::Kept);
  call.forward(in.shape);
  std::vector<float> stats = downloadFloats(call.stats);
  // The backward gets the CPU's output and statistics, so that both
  // backwards see the same inputs.
  call.out = upload(cpu.out, offset);
  call.stats = upload(floatBytes(cpu.stats), 0);
  call.backward(in.shape);
  double tolerance = toleranceOf(dtype);
  std::string what = describeAttention(in.shape) + " on CUDA, stats kept";
  expectStatsClose(stats, toDoubles(cpu.stats), kStatsTolerance,
                   what + " stats");
  expectClose(widen(dtype, download(call.dq)), widen(dtype, cpu.dq), tolerance,
              what + " dq");
  expectClose(widen(dtype, download(call.dk)), widen(dtype, cpu.dk), tolerance,
              what + " dk");
  expectClose(widen(dtype, download(call.dv)), widen(dtype, cpu.dv), tolerance,
              what + " dv");
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionOnCuda,
                         ::testing::ValuesIn(allCases()), caseName);

// cuDNN's attention through CudnnAttention, against the CPU as the
// runtime's own kernels are.

/// cuDNN's handle in the tests' context, made on first use and never
/// destroyed (as CudaState).
CudnnAttention &cudnnState() {
  static CudnnAttention *state = new CudnnAttention(cudaState().context);
  return *state;
}

/// Why the cuDNN tests cannot run here, or empty.
std::string cudnnUnavailable() {
  std::string reason = cudaUnavailable();
  if (!reason.empty())
    return reason;
  const CudnnLibraryStatus &library = cudnnLibrary();
  return library.loaded ? "" : library.description;
}

/// The tensors of DeviceCall, run through cuDNN with its own scratch.
struct CudnnCall {
  DeviceCall call;
  DeviceTensor forwardScratch, backwardScratch;

  CudnnCall(const Inputs &in, size_t offset, Stats mode = Stats::Recomputed)
      : call(in, offset, mode),
        forwardScratch(
            cudnnState().scratchBytes(in.shape, false, mode == Stats::Kept), 0),
        backwardScratch(
            cudnnState().scratchBytes(in.shape, true, mode == Stats::Kept), 0) {
  }

  void forward(const AttentionShape &shape) {
    cudnnState().forward(shape, call.q.address, call.k.address, call.v.address,
                         call.out.address, call.statsAddress(),
                         forwardScratch.address, forwardScratch.bytes,
                         cudaState().context.stream());
  }

  void backward(const AttentionShape &shape) {
    cudnnState().backward(shape, call.dout.address, call.q.address,
                          call.k.address, call.v.address, call.out.address,
                          call.statsAddress(), call.dq.address, call.dk.address,
                          call.dv.address, backwardScratch.address,
                          backwardScratch.bytes, cudaState().context.stream());
  }
};

/// Prepares `shape` on cuDNN in both directions, with and without the
/// statistics kept: empty, or cuDNN's reason for refusing it (or the
/// runtime's, for shapes it never gives cuDNN).
std::string prepareOnCudnn(const AttentionShape &shape) {
  std::string why =
      cudnnAttentionRefusal(shape, cudaState().context.computeMajor());
  for (bool backward : {false, true})
    for (bool stats : {false, true})
      if (why.empty())
        why = cudnnState().prepare(shape, backward, stats);
  return why;
}

/// The shapes every cuDNN 9 on Hopper takes: self-attention with head
/// dimensions of 64 or 128 (plain, causal, grouped).
bool cudnnMustTake(const AttentionShape &s) {
  return s.seqQ == s.seqKv && s.headDim == s.valueDim &&
         (s.headDim == 64 || s.headDim == 128);
}

class AttentionOnCudnn : public ::testing::TestWithParam<CaseParam> {
protected:
  void SetUp() override {
    std::string reason = cudnnUnavailable();
    if (!reason.empty())
      GTEST_SKIP() << "cuDNN unavailable: " << reason;
  }
};

TEST_P(AttentionOnCudnn, MatchesCpu) {
  const auto &[c, dtype] = GetParam();
  AttentionShape shape = shapeOf(c, dtype);
  if (std::string why = prepareOnCudnn(shape); !why.empty()) {
    if (cudnnMustTake(shape) &&
        cudnnAttentionRefusal(shape, cudaState().context.computeMajor())
            .empty())
      FAIL() << describeAttention(shape) << " was refused: " << why;
    GTEST_SKIP() << describeAttention(shape)
                 << " runs on megrt's kernels: " << why;
  }
  Inputs in = randomInputs(shape, 2);
  Results cpu = cpuAttention(in);
  CudnnCall run(in, 0);
  run.forward(shape);
  Bytes out = download(run.call.out);
  run.call.out = upload(cpu.out, 0);
  run.backward(shape);
  double tolerance = toleranceOf(dtype);
  std::string what = describeAttention(shape) + " through cuDNN";
  expectClose(widen(dtype, out), widen(dtype, cpu.out), tolerance,
              what + " out");
  expectClose(widen(dtype, download(run.call.dq)), widen(dtype, cpu.dq),
              tolerance, what + " dq");
  expectClose(widen(dtype, download(run.call.dk)), widen(dtype, cpu.dk),
              tolerance, what + " dk");
  expectClose(widen(dtype, download(run.call.dv)), widen(dtype, cpu.dv),
              tolerance, what + " dv");
}

TEST_P(AttentionOnCudnn, KeptStatsMatchCpu) {
  const auto &[c, dtype] = GetParam();
  AttentionShape shape = shapeOf(c, dtype);
  if (std::string why = prepareOnCudnn(shape); !why.empty())
    GTEST_SKIP() << describeAttention(shape)
                 << " runs on megrt's kernels: " << why;
  Inputs in = randomInputs(shape, 2);
  Results cpu = cpuAttention(in, 3, Stats::Kept);
  CudnnCall run(in, 0, Stats::Kept);
  run.forward(shape);
  std::vector<float> stats = downloadFloats(run.call.stats);
  run.call.out = upload(cpu.out, 0);
  run.call.stats = upload(floatBytes(cpu.stats), 0);
  run.backward(shape);
  double tolerance = toleranceOf(dtype);
  std::string what = describeAttention(shape) + " through cuDNN, stats kept";
  // cuDNN's statistics are those of its own (tensor-core) scores.
  expectStatsClose(stats, toDoubles(cpu.stats), tolerance, what + " stats");
  expectClose(widen(dtype, download(run.call.dq)), widen(dtype, cpu.dq),
              tolerance, what + " dq");
  expectClose(widen(dtype, download(run.call.dk)), widen(dtype, cpu.dk),
              tolerance, what + " dk");
  expectClose(widen(dtype, download(run.call.dv)), widen(dtype, cpu.dv),
              tolerance, what + " dv");
}

std::vector<CaseParam> halfCases() {
  std::vector<CaseParam> params;
  for (const CaseParam &param : allCases())
    if (param.dtype != DType::F32)
      params.push_back(param);
  return params;
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionOnCudnn,
                         ::testing::ValuesIn(halfCases()), caseName);

class AttentionCuda : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason = cudaUnavailable();
    if (!reason.empty())
      GTEST_SKIP() << "CUDA unavailable: " << reason;
  }
};

/// `in` (with its query positions) forward and backward on CUDA, with or
/// without the forward's statistics, against the CPU; with
/// `infiniteStats` the rows whose CPU statistics are +inf (no key seen)
/// must be +inf on CUDA too.
void expectPositionsMatchCpu(const Inputs &in, DType dtype, Stats mode,
                             const std::string &what, bool infiniteStats) {
  Results cpu = cpuAttention(in, 3, mode);
  DeviceCall call(in, 0, mode);
  call.forward(in.shape);
  Bytes out = download(call.out);
  if (mode == Stats::Kept) {
    if (infiniteStats) {
      std::vector<float> stats = downloadFloats(call.stats);
      for (size_t i = 0; i < stats.size(); ++i) {
        if (std::isinf(cpu.stats[i])) {
          EXPECT_EQ(stats[i], INFINITY) << "row " << i;
        }
      }
    }
    call.stats = upload(floatBytes(cpu.stats), 0);
  }
  call.out = upload(cpu.out, 0);
  call.backward(in.shape);
  double tolerance = toleranceOf(dtype);
  expectClose(widen(dtype, out), widen(dtype, cpu.out), tolerance,
              what + " out");
  expectClose(widen(dtype, download(call.dq)), widen(dtype, cpu.dq), tolerance,
              what + " dq");
  expectClose(widen(dtype, download(call.dk)), widen(dtype, cpu.dk), tolerance,
              what + " dk");
  expectClose(widen(dtype, download(call.dv)), widen(dtype, cpu.dv), tolerance,
              what + " dv");
}

// A context-parallel rank's queries (two chunks at their positions)
// against every key, forward and backward, with and without the forward's
// statistics, against the CPU: ranks 0 and 3 of 4, and a tile of 64 rows
// that holds the end of one chunk and the start of the other.
TEST_F(AttentionCuda, ContextParallelPositionsMatchCpu) {
  for (DType dtype : kDTypes)
    for (int64_t rank : {0, 3})
      for (Stats mode : {Stats::Recomputed, Stats::Kept}) {
        AttentionCase c{"cp", 2, 100, 400, 4, 2, 64, 64, true};
        Inputs in = randomInputs(shapeOf(c, dtype), 11 + rank);
        in.positions = contextParallelPositions(4, rank, 50);
        expectPositionsMatchCpu(in, dtype, mode,
                                describeAttention(in.shape) +
                                    " on CUDA, positions of rank " +
                                    std::to_string(rank) +
                                    (mode == Stats::Kept ? ", stats kept" : ""),
                                /*infiniteStats=*/false);
      }
}

// A ring step's block on CUDA (queries that see no key included), forward
// and backward, with and without the forward's statistics, against the
// CPU.
TEST_F(AttentionCuda, RingBlockPositionsMatchCpu) {
  for (DType dtype : kDTypes)
    for (bool laterRank : {false, true})
      for (Stats mode : {Stats::Recomputed, Stats::Kept}) {
        AttentionCase c{"ring", 2, 100, 100, 4, 2, 64, 64, true};
        Inputs in = randomInputs(shapeOf(c, dtype), 23 + laterRank);
        in.positions = ringBlockPositions(laterRank, 50);
        expectPositionsMatchCpu(in, dtype, mode,
                                describeAttention(in.shape) + " on CUDA, " +
                                    (laterRank ? "block of a later rank"
                                               : "block of an earlier rank") +
                                    (mode == Stats::Kept ? ", stats kept" : ""),
                                /*infiniteStats=*/true);
      }
}

TEST_F(AttentionCuda, ErrorsNameTheShape) {
  AttentionShape shape{1, 4, 4, 2, 2, 320, 64, false, 1.0f, DType::BF16};
  CudaState &cuda = cudaState();
  try {
    cuda.attention.forward(shape, 0, 0, 0, 0, 0, 0, cuda.context.stream());
    FAIL() << "D=320 was accepted";
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(),
                 "attention bf16 B=1 Sq=4 Skv=4 H=2 Hkv=2 D=320 Dv=64: head "
                 "dimensions up to 256 are supported on CUDA, found 320");
  }
  shape.headDim = 64;
  size_t needed = CudaAttention::backwardScratchBytes(shape);
  try {
    cuda.attention.backward(shape, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, needed - 1,
                            cuda.context.stream());
    FAIL() << "a short scratch was accepted";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("the backward needs"),
              std::string::npos)
        << error.what();
  }
}

/// Milliseconds per call of `run`, averaged over `repeats` after one
/// warm-up call, timed with events on the test stream.
template <typename Run> double timeMs(Run run, int repeats) {
  CudaState &cuda = cudaState();
  run();
  CudaEvent start("attention timing"), end("attention timing");
  start.record(cuda.context.stream(), "attention timing");
  for (int i = 0; i < repeats; ++i)
    run();
  end.record(cuda.context.stream(), "attention timing");
  cuda.context.synchronize("attention timing");
  return CudaEvent::elapsedMs(start, end, "attention timing") / repeats;
}

/// The shape of the throughput figures: B=2 S=4096 H=16 (8 KV heads)
/// D=128, causal, bf16.
AttentionShape largeCausalBf16() {
  const float scale = static_cast<float>(1.0 / std::sqrt(128.0));
  return {2, 4096, 4096, 16, 8, 128, 128, true, scale, DType::BF16};
}

/// Times `forward` and `backward` (which run the attention of `in` on
/// `call`'s tensors through `kernels`), prints their TFLOP/s, and checks
/// sampled rows of the results against the reference.
template <typename Forward, typename Backward>
void reportThroughput(const char *kernels, const Inputs &in,
                      const DeviceCall &call, Forward forward,
                      Backward backward) {
  const AttentionShape &shape = in.shape;
  double forwardMs = timeMs(forward, 5);
  double backwardMs = timeMs(backward, 3);

  // Query-key pairs the causal mask keeps; a forward does 2 (D + Dv) flops
  // per pair, a backward 2 (3 D + 2 Dv) (the usual 2.5 times the forward;
  // it is given the forward's row statistics, as in training).
  double pairs = 0.0;
  for (int64_t i = 0; i < shape.seqQ; ++i)
    pairs += double(visibleKeys(in, i));
  pairs *= double(shape.batch * shape.heads);
  double forwardFlops = 2.0 * (shape.headDim + shape.valueDim) * pairs;
  double backwardFlops = 2.0 * (3 * shape.headDim + 2 * shape.valueDim) * pairs;
  std::printf("[ timing   ] %s, %s: forward %.3f ms (%.1f TFLOP/s), "
              "backward %.3f ms (%.1f TFLOP/s)\n",
              describeAttention(shape).c_str(), kernels, forwardMs,
              forwardFlops / forwardMs * 1e-9, backwardMs,
              backwardFlops / backwardMs * 1e-9);

  // Sampled rows against the reference: tile edges, both ends, and keys
  // near the end (which few queries see, so that their dk/dv are cheap to
  // recompute).
  Values values(in);
  std::vector<float> out = widen(shape.dtype, download(call.out));
  std::vector<float> dq = widen(shape.dtype, download(call.dq));
  std::vector<float> dk = widen(shape.dtype, download(call.dk));
  std::vector<float> dv = widen(shape.dtype, download(call.dv));
  double tolerance = toleranceOf(shape.dtype);
  for (int64_t i : {0, 1, 63, 64, 1000, 2047, 4031, 4095}) {
    for (auto [b, h] : {std::pair<int64_t, int64_t>{0, 0}, {1, 13}}) {
      RowReference row = referenceRow(in, values, b, h, i);
      int64_t index = (b * shape.seqQ + i) * shape.heads + h;
      std::string what = concat("row b=", b, " h=", h, " i=", i);
      expectClose(
          std::vector<float>(out.begin() + index * shape.valueDim,
                             out.begin() + (index + 1) * shape.valueDim),
          row.out, tolerance, what + " out");
      expectClose(std::vector<float>(dq.begin() + index * shape.headDim,
                                     dq.begin() + (index + 1) * shape.headDim),
                  row.dq, tolerance, what + " dq");
    }
  }
  const int64_t b = 1, g = 5;
  for (int64_t j : {4095, 4064, 4000}) {
    std::vector<double> dkRef(shape.headDim), dvRef(shape.valueDim);
    for (int64_t h = g * 2; h < g * 2 + 2; ++h)
      for (int64_t i = j; i < shape.seqQ; ++i) {
        RowReference row = referenceRow(in, values, b, h, i);
        int64_t index = (b * shape.seqQ + i) * shape.heads + h;
        for (int64_t d = 0; d < shape.headDim; ++d)
          dkRef[d] +=
              shape.scale * row.ds[j] * values.q[index * shape.headDim + d];
        for (int64_t n = 0; n < shape.valueDim; ++n)
          dvRef[n] += row.probs[j] * values.dout[index * shape.valueDim + n];
      }
    int64_t index = (b * shape.seqKv + j) * shape.kvHeads + g;
    std::string what = concat("key b=", b, " g=", g, " j=", j);
    expectClose(std::vector<float>(dk.begin() + index * shape.headDim,
                                   dk.begin() + (index + 1) * shape.headDim),
                dkRef, tolerance, what + " dk");
    expectClose(std::vector<float>(dv.begin() + index * shape.valueDim,
                                   dv.begin() + (index + 1) * shape.valueDim),
                dvRef, tolerance, what + " dv");
  }
}

TEST_F(AttentionCuda, LargeCausalBf16ReportsThroughput) {
  AttentionShape shape = largeCausalBf16();
  Inputs in = randomInputs(shape, 3);
  DeviceCall call(in, 0, Stats::Kept);
  reportThroughput(
      "megrt's kernels", in, call, [&] { call.forward(shape); },
      [&] { call.backward(shape); });
}

TEST(AttentionCudnn, LargeCausalBf16ReportsThroughput) {
  if (std::string reason = cudnnUnavailable(); !reason.empty())
    GTEST_SKIP() << "cuDNN unavailable: " << reason;
  AttentionShape shape = largeCausalBf16();
  if (std::string why = prepareOnCudnn(shape); !why.empty())
    FAIL() << describeAttention(shape) << " was refused: " << why;
  Inputs in = randomInputs(shape, 3);
  CudnnCall run(in, 0, Stats::Kept);
  reportThroughput(
      "cuDNN", in, run.call, [&] { run.forward(shape); },
      [&] { run.backward(shape); });
}

#endif // MEGRT_WITH_CUDA

} // namespace
} // namespace megrt::test
