// Parameter initialisation: exact constants, determinism, distributions.
#include "ArtifactBuilder.h"
#include "CounterRandom.h"
#include "TestFiles.h"
#include "megrt/HalfFloat.h"
#include "megrt/Session.h"

#include <cmath>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

Session sessionWith(std::vector<ParamDesc> params, uint64_t seed) {
  ProgramDesc program;
  program.params = std::move(params);
  return Session(Program::fromBytes(buildArtifact(program)), {"cpu", seed});
}

struct Moments {
  double mean, stddev, min, max;
};

Moments momentsOf(const std::vector<float> &values) {
  double sum = 0, sumSq = 0, lo = INFINITY, hi = -INFINITY;
  for (float v : values) {
    sum += v;
    sumSq += double(v) * v;
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  double mean = sum / values.size();
  return {mean, std::sqrt(sumSq / values.size() - mean * mean), lo, hi};
}

TEST(ParameterInit, ZerosAndOnesAreExact) {
  Session session =
      sessionWith({{"z", fb::DType::f32, {3, 5}, fb::InitKind::zeros, 1.0},
                   {"one32", fb::DType::f32, {7}, fb::InitKind::ones, 0.0},
                   {"onebf", fb::DType::bf16, {7}, fb::InitKind::ones, 0.0},
                   {"onehalf", fb::DType::f16, {7}, fb::InitKind::ones, 0.0},
                   {"onei32", fb::DType::i32, {7}, fb::InitKind::ones, 0.0},
                   {"onei64", fb::DType::i64, {7}, fb::InitKind::ones, 0.0}},
                  5);
  for (float v : session.parameter("z").toFloats())
    EXPECT_EQ(v, 0.0f);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(session.parameter("one32").dataAs<float>()[i], 1.0f);
    EXPECT_EQ(session.parameter("onebf").dataAs<uint16_t>()[i], 0x3f80);
    EXPECT_EQ(session.parameter("onehalf").dataAs<uint16_t>()[i], 0x3c00);
    EXPECT_EQ(session.parameter("onei32").dataAs<int32_t>()[i], 1);
    EXPECT_EQ(session.parameter("onei64").dataAs<int64_t>()[i], 1);
  }
}

std::vector<ParamDesc> randomParams() {
  return {{"n", fb::DType::f32, {64, 33}, fb::InitKind::normal, 0.02},
          {"u", fb::DType::bf16, {100}, fb::InitKind::uniform, 0.5},
          {"h", fb::DType::f16, {100}, fb::InitKind::normal, 1.0}};
}

TEST(ParameterInit, SameSeedSameBytes) {
  Session one = sessionWith(randomParams(), 1234);
  Session two = sessionWith(randomParams(), 1234);
  for (const char *name : {"n", "u", "h"})
    EXPECT_EQ(one.parameter(name), two.parameter(name)) << name;
  // Reinitialising an existing session reproduces them too.
  two.initParameters(77);
  two.initParameters(1234);
  EXPECT_EQ(one.parameter("n"), two.parameter("n"));
}

TEST(ParameterInit, DifferentSeedsDiffer) {
  Session one = sessionWith(randomParams(), 1);
  Session two = sessionWith(randomParams(), 2);
  for (const char *name : {"n", "u", "h"}) {
    std::vector<float> a = one.parameter(name).toFloats();
    std::vector<float> b = two.parameter(name).toFloats();
    size_t equal = 0;
    for (size_t i = 0; i < a.size(); ++i)
      equal += a[i] == b[i];
    EXPECT_LT(equal, a.size() / 10) << name;
  }
}

TEST(ParameterInit, ParametersWithTheSameSeedAreIndependent) {
  Session session =
      sessionWith({{"a", fb::DType::f32, {1000}, fb::InitKind::normal, 1.0},
                   {"b", fb::DType::f32, {1000}, fb::InitKind::normal, 1.0}},
                  9);
  std::vector<float> a = session.parameter("a").toFloats();
  std::vector<float> b = session.parameter("b").toFloats();
  double dot = 0;
  for (size_t i = 0; i < a.size(); ++i)
    dot += double(a[i]) * b[i];
  // Correlation of independent normals: |r| < 4/sqrt(1000) nearly surely.
  EXPECT_LT(std::abs(dot / a.size()), 0.13);
}

TEST(ParameterInit, ValuesFollowTheNameNotThePosition) {
  ParamDesc a{"a", fb::DType::f32, {50}, fb::InitKind::normal, 1.0};
  ParamDesc b{"b", fb::DType::f32, {50}, fb::InitKind::uniform, 1.0};
  Session forward = sessionWith({a, b}, 3);
  Session reversed = sessionWith({b, a}, 3);
  EXPECT_EQ(forward.parameter("a"), reversed.parameter("a"));
  EXPECT_EQ(forward.parameter("b"), reversed.parameter("b"));
}

TEST(ParameterInit, NormalHasTheRequestedStd) {
  Session session = sessionWith(
      {{"w", fb::DType::f32, {100000}, fb::InitKind::normal, 0.02}}, 42);
  Moments m = momentsOf(session.parameter("w").toFloats());
  EXPECT_NEAR(m.stddev, 0.02, 0.02 * 0.05);
  EXPECT_NEAR(m.mean, 0.0, 0.02 * 0.05);
  // Over 1e5 samples the extremes of a normal lie near 4.4 sigma.
  EXPECT_GT(m.max, 0.02 * 3.5);
  EXPECT_LT(m.min, -0.02 * 3.5);
}

TEST(ParameterInit, NormalTailsMatchTheGaussian) {
  Session session = sessionWith(
      {{"w", fb::DType::f32, {200000}, fb::InitKind::normal, 1.0}}, 7);
  size_t within1 = 0, within2 = 0;
  std::vector<float> values = session.parameter("w").toFloats();
  for (float v : values) {
    within1 += std::abs(v) < 1.0f;
    within2 += std::abs(v) < 2.0f;
  }
  EXPECT_NEAR(double(within1) / values.size(), 0.6827, 0.005);
  EXPECT_NEAR(double(within2) / values.size(), 0.9545, 0.003);
}

TEST(ParameterInit, UniformStaysInRange) {
  Session session = sessionWith(
      {{"w", fb::DType::f32, {100000}, fb::InitKind::uniform, 0.1}}, 8);
  Moments m = momentsOf(session.parameter("w").toFloats());
  EXPECT_GE(m.min, -0.1);
  EXPECT_LT(m.max, 0.1);
  EXPECT_NEAR(m.stddev, 0.1 / std::sqrt(3.0), 0.1 * 0.01);
  EXPECT_NEAR(m.mean, 0.0, 0.002);
}

TEST(ParameterInit, HalfDTypesAreTheRoundedF32Values) {
  Session session =
      sessionWith({{"w", fb::DType::bf16, {64}, fb::InitKind::normal, 0.5},
                   {"v", fb::DType::f32, {64}, fb::InitKind::normal, 0.5}},
                  4);
  // Same name would give the same stream; compare "w" against f32 "w".
  Session f32 =
      sessionWith({{"w", fb::DType::f32, {64}, fb::InitKind::normal, 0.5}}, 4);
  const uint16_t *bits = session.parameter("w").dataAs<uint16_t>();
  const float *exact = f32.parameter("w").dataAs<float>();
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(bits[i], floatToBf16(exact[i])) << i;
}

/// A session initialises its parameters in chunks on its threads: the
/// bytes are the same for any thread count, and element i is still draw i
/// of the parameter's stream on both sides of a chunk's edge.
TEST(ParameterInit, ThreadsFillTheSameBytes) {
  std::vector<ParamDesc> params = {
      {"n", fb::DType::f32, {300, 701}, fb::InitKind::normal, 0.02},
      {"u", fb::DType::bf16, {70001}, fb::InitKind::uniform, 0.5},
      {"h", fb::DType::f16, {3, 65536}, fb::InitKind::normal, 1.0}};
  ProgramDesc program;
  program.params = params;
  std::vector<uint8_t> bytes = buildArtifact(program);
  auto sessionOn = [&](unsigned threads) {
    SessionOptions options{"cpu", 11};
    options.threads = threads;
    return Session(Program::fromBytes(bytes), options);
  };
  Session one = sessionOn(1);
  for (unsigned threads : {2u, 3u}) {
    Session many = sessionOn(threads);
    for (const char *name : {"n", "u", "h"})
      EXPECT_EQ(one.parameter(name), many.parameter(name))
          << name << " on " << threads << " threads";
  }
  CounterRandom random(11, hashName("n"));
  Session three = sessionOn(3);
  const float *n = three.parameter("n").dataAs<float>();
  for (int64_t i : {0, 65535, 65536, 65537, 131072, 300 * 701 - 1})
    EXPECT_EQ(n[i], static_cast<float>(0.02 * random.normal(i))) << i;
}

/// initializeWeights = false: the model weights stay zero for a load to
/// set, the training state is initialised, and after the load the session
/// equals one that initialised everything first.
TEST(ParameterInit, WeightsLeftForALoad) {
  ProgramDesc program;
  program.params = {{"w", fb::DType::f32, {40}, fb::InitKind::normal, 1.0},
                    {"m", fb::DType::f32, {40}, fb::InitKind::ones, 0.0}};
  program.params[1].state = true;
  std::vector<uint8_t> bytes = buildArtifact(program);
  SessionOptions options{"cpu", 5};
  Session full(Program::fromBytes(bytes), options);
  std::string weights = tempPath("weights-left-for-a-load.safetensors");
  full.saveParameters(weights);

  options.initializeWeights = false;
  Session left(Program::fromBytes(bytes), options);
  for (float v : left.parameter("w").toFloats())
    EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(left.parameter("m"), full.parameter("m"));
  left.loadParameters(weights);
  EXPECT_EQ(left.parameter("w"), full.parameter("w"));
  EXPECT_EQ(left.parameter("m"), full.parameter("m"));
  // initParameters still initialises everything.
  left.initParameters(5);
  EXPECT_EQ(left.parameter("w"), full.parameter("w"));
}

TEST(CounterRandom, SplitMix64MatchesTheReference) {
  // First outputs of the reference SplitMix64 seeded with 0 (Vigna's
  // splitmix64.c): mix(k * 0x9e3779b97f4a7c15) for k = 1, 2, 3.
  EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(0x3c6ef372fe94f82aull), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64(0xdaa66d2c7ddf743full), 0x06c45d188009454full);
}

TEST(CounterRandom, DrawsDependOnlyOnKeyAndCounter) {
  CounterRandom random(5, hashName("w"));
  double late = random.normal(1000);
  double early = random.normal(3);
  EXPECT_EQ(CounterRandom(5, hashName("w")).normal(1000), late);
  EXPECT_EQ(CounterRandom(5, hashName("w")).normal(3), early);
  EXPECT_NE(CounterRandom(6, hashName("w")).normal(3), early);
  EXPECT_NE(CounterRandom(5, hashName("v")).normal(3), early);
}

} // namespace
} // namespace megrt::test
