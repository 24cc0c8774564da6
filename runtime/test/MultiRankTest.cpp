// Multi-rank programs on 4 ranks (run under mpirun by ctest): collectives
// through Session::run with split inputs against values computed from the
// collectives' definitions, sharded parameters against the single-rank
// initialisation, full-tensor checkpoints, and the checks at construction.
#include "ArtifactBuilder.h"
#include "DataParallelReference.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "comm/Communicator.h"
#include "megrt/Error.h"
#include "megrt/Safetensors.h"
#include "megrt/Session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

/// The mesh these tests run on: @world [dp_outer=2, dp_shard=2].
constexpr int64_t kOuter = 2;
constexpr int64_t kShard = 2;

comm::World &world() { return comm::connectWorld(); }

SessionOptions options(uint64_t seed = 0) {
  SessionOptions options;
  options.seed = seed;
  options.commTimeoutSeconds = 60;
  return options;
}

Program dataParallel(int64_t extraPadding = 0) {
  return Program::fromBytes(
      buildArtifact(dataParallelProgram(kOuter, kShard, extraPadding)));
}

/// Rank 0's path, on every rank.
std::string sharedPath(const std::string &name) {
  char path[512] = {};
  if (world().rank() == 0) {
    std::string mine = tempPath(name);
    EXPECT_LT(mine.size(), sizeof path) << mine;
    std::memcpy(path, mine.data(), std::min(mine.size(), sizeof path - 1));
  }
  world().broadcast(path, sizeof path, 0);
  return path;
}

/// Elements [first, first + n) of `values`, zero past their end.
std::vector<float> pieceOf(const std::vector<float> &values, int64_t first,
                           int64_t n) {
  std::vector<float> piece(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n && first + i < int64_t(values.size()); ++i)
    piece[i] = values[first + i];
  return piece;
}

TEST(MultiRank, TheWorldIsTheMesh) {
  ASSERT_EQ(world().size(), kOuter * kShard)
      << "run these tests with mpirun -n " << kOuter * kShard;
  Session session(dataParallel(), options());
  EXPECT_EQ(session.rank(), world().rank());
  EXPECT_EQ(session.worldSize(), 4);
}

TEST(MultiRank, CollectivesThroughRun) {
  Session session(dataParallel(), options(5));
  for (uint32_t seed : {1u, 2u}) {
    Tensor x = dataParallelInput(kOuter, kShard, seed);
    std::map<std::string, Tensor> outputs = session.run("step", {{"x", x}});
    auto expected =
        dataParallelOutputs(kOuter, kShard, 0, world().rank(), x, 5);
    ASSERT_EQ(outputs.size(), expected.size());
    for (const auto &[name, values] : expected)
      EXPECT_EQ(outputs.at(name).toFloats(), values)
          << name << " on rank " << world().rank() << ", input " << seed;
  }
}

TEST(MultiRank, SplitInputsTakeTheGlobalTensor) {
  Session session(dataParallel(), options());
  try {
    session.run("step", {{"x", Tensor(DType::F32, {2, 4})}});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "entry 'step': input 'x' is split over submesh 1 (4 ranks): "
              "expected the global shape [8,4] (2 rows per rank), found "
              "[2,4]");
  }
}

TEST(MultiRank, ShardedInitIsThePieceOfTheSingleRankInit) {
  // Pieces of 9: rank (o, s) holds elements [9s, 9s + 9) of 15, padded.
  Session session(dataParallel(/*extraPadding=*/1), options(11));
  int64_t first = (world().rank() % kShard) * 9;
  EXPECT_EQ(session.parameter("w").toFloats(),
            pieceOf(fullInitialValues("w", 11), first, 9));
  EXPECT_EQ(session.parameter("piece").toFloats(),
            pieceOf(fullInitialValues("full", 11), first, 9));
  EXPECT_EQ(session.parameter("full").toFloats(),
            fullInitialValues("full", 11));
}

TEST(MultiRank, CheckpointsHoldFullTensors) {
  std::string path = sharedPath("params.safetensors");
  int rank = world().rank();
  int64_t shard = rank % kShard;
  // Each rank's piece of w: 100 * shard + i, so that the file shows which
  // rank's piece landed where; the padding (one element) is dropped.
  {
    Session session(dataParallel(), options());
    std::vector<float> piece;
    for (int i = 0; i < 8; ++i)
      piece.push_back(static_cast<float>(100 * shard + i));
    session.setParameter("w", Tensor::fromFloats(DType::F32, {8}, piece));
    session.saveParameters(path);
  }
  world().barrier();
  std::map<std::string, Tensor> saved = readSafetensors(path);
  ASSERT_EQ(saved.at("w").shape(), (Shape{3, 5}));
  std::vector<float> full;
  for (int s = 0; s < kShard; ++s)
    for (int i = 0; i < 8; ++i)
      full.push_back(static_cast<float>(100 * s + i));
  full.resize(15);
  EXPECT_EQ(saved.at("w").toFloats(), full);
  EXPECT_EQ(saved.at("full").toFloats(), fullInitialValues("full", 0));

  Session reloaded(dataParallel(), options(3));
  reloaded.loadParameters(path);
  EXPECT_EQ(reloaded.parameter("w").toFloats(), pieceOf(full, 8 * shard, 8));
  world().barrier();
}

TEST(MultiRank, EveryRankNeedsTheSameArtifact) {
  ProgramDesc desc = dataParallelProgram(kOuter, kShard);
  Program same = Program::fromBytes(buildArtifact(desc));
  desc.producer = "another-compiler";
  Program other = Program::fromBytes(buildArtifact(desc));
  std::ostringstream expected;
  expected << "the ranks loaded different artifacts (ranks 0, 1 loaded the "
              "artifact with checksum "
           << std::hex << same.checksum()
           << "; ranks 2, 3 loaded the artifact with checksum "
           << other.checksum() << "): every rank must load the same .megc file";
  try {
    Session session(world().rank() < 2 ? same : other, options());
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()), expected.str());
  }
}

TEST(MultiRank, TheWorldMustHaveTheMeshsRanks) {
  try {
    Session session(
        Program::fromBytes(buildArtifact(dataParallelProgram(1, 2))),
        options());
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(),
                HasSubstr("the artifact's mesh @world [dp_outer=1, "
                          "dp_shard=2] needs 2 ranks, but this run has 4 ("));
    EXPECT_THAT(error.what(), HasSubstr("; start it with mpirun -n 2)"));
  }
}

TEST(MultiRank, EachRankWritesItsTrace) {
  std::string path = tempPath("trace.json");
  {
    SessionOptions traced = options();
    traced.traceFile = path;
    Session session(dataParallel(), traced);
    session.run("step", {{"x", dataParallelInput(kOuter, kShard, 1)}});
  }
  int rank = world().rank();
  std::filesystem::path file(path);
  std::string written =
      rank == 0 ? path
                : (file.parent_path() / (file.stem().string() + ".rank" +
                                         std::to_string(rank) + ".json"))
                      .string();
  EXPECT_TRUE(std::filesystem::exists(written)) << written;
  std::remove(written.c_str());
}

} // namespace
} // namespace megrt::test
