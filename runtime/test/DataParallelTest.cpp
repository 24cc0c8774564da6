// Multi-rank programs in one process: a mesh of one rank runs collectives,
// sharded parameters and split inputs with single-rank semantics; a mesh of
// more ranks is refused before anything runs.
#include "ArtifactBuilder.h"
#include "CollectiveCommand.h"
#include "DataParallelReference.h"
#include "FbTypes.h"
#include "MeshLayout.h"
#include "ParameterInit.h"
#include "SamplePrograms.h"
#include "TestDevices.h"
#include "TestFiles.h"
#include "TraceEvents.h"
#include "cpu/CpuEntry.h"
#include "cpu/CpuModule.h"
#include "megrt/Error.h"
#include "megrt/Safetensors.h"
#include "megrt/Session.h"
#include "megrt/megrt_c.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

Program dataParallel(int64_t outer, int64_t shard, int64_t extraPadding = 0) {
  return Program::fromBytes(
      buildArtifact(dataParallelProgram(outer, shard, extraPadding)));
}

std::string constructionError(const Program &program) {
  try {
    Session session(program);
  } catch (const Error &error) {
    return error.what();
  }
  return "(constructed)";
}

TEST(MeshLayout, NumbersRanksRowMajor) {
  ProgramDesc desc = linearProgram();
  desc.mesh = MeshDesc{"world", {{"a", 2}, {"b", 3}, {"c", 2}}};
  desc.submeshes = {{"b"}, {"c", "a"}, {"a", "b", "c"}};
  MeshLayout layout(Program::fromBytes(buildArtifact(desc)));
  ASSERT_EQ(layout.numRanks(), 12);
  // Rank 11 is (a=1, b=2, c=1); rank 4 is (0, 2, 0).
  EXPECT_EQ(layout.groupSize(0), 3);
  EXPECT_EQ(layout.indexInGroup(0, 11), 2);
  EXPECT_EQ(layout.groupOf(0, 11), 1 * 2 + 1);
  EXPECT_EQ(layout.indexInGroup(0, 4), 2);
  EXPECT_EQ(layout.groupOf(0, 4), 0);
  // Submesh (c, a): the index is c * 2 + a; the group is b.
  EXPECT_EQ(layout.groupSize(1), 4);
  EXPECT_EQ(layout.indexInGroup(1, 11), 1 * 2 + 1);
  EXPECT_EQ(layout.indexInGroup(1, 4), 0);
  EXPECT_EQ(layout.indexInGroup(1, 1), 2);
  EXPECT_EQ(layout.groupOf(1, 11), 2);
  EXPECT_EQ(layout.groupOf(1, 4), 2);
  // Every axis: one group, the world rank as index.
  for (int rank = 0; rank < 12; ++rank) {
    EXPECT_EQ(layout.groupOf(2, rank), 0);
    EXPECT_EQ(layout.indexInGroup(2, rank), rank);
  }
}

/// On every device: the collectives of a mesh of one rank (on a CUDA
/// device, NCCL groups of one rank), with the slice and the copies around
/// it in a graph region or not.
class DataParallelDevices : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string reason = deviceUnavailable(GetParam());
    if (!reason.empty())
      GTEST_SKIP() << GetParam() << " unavailable: " << reason;
  }
};

TEST_P(DataParallelDevices, MeshOfOneRankRunsLikeOneRank) {
  for (bool graphs : {false, true}) {
    ProgramDesc desc = dataParallelProgram(1, 1);
    desc.cuda = CudaModuleDesc{"sm_90", kEmptyPtx, {}};
    desc.entries[0].graphs = {{"local", 4, 2}};
    SessionOptions options;
    options.device = GetParam();
    options.cudaGraphs = graphs;
    Session session(Program::fromBytes(buildArtifact(desc)), options);
    EXPECT_EQ(session.rank(), 0);
    EXPECT_EQ(session.worldSize(), 1);
    for (uint32_t seed : {3u, 4u}) {
      Tensor x = dataParallelInput(1, 1, seed);
      std::map<std::string, Tensor> outputs = session.run("step", {{"x", x}});
      auto expected = dataParallelOutputs(1, 1, 0, 0, x, /*seed=*/0);
      ASSERT_EQ(outputs.size(), expected.size());
      for (const auto &[name, values] : expected)
        EXPECT_EQ(outputs.at(name).toFloats(), values)
            << name << (graphs ? " with graphs" : "") << ", input " << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DataParallelDevices,
                         ::testing::ValuesIn(testDevices()),
                         [](const auto &info) { return info.param; });

/// A group of one rank whose waits fail from the `failAt`-th started
/// collective on, as when a peer dies; it records what was waited for.
class FailingGroup : public comm::Group {
public:
  explicit FailingGroup(uint64_t failAt) : failAt_(failAt) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  uint64_t start(comm::CollectiveKind, const void *, void *, size_t, DType,
                 comm::ReduceOp, void *) override {
    return ++started_;
  }
  uint64_t startExchange(const void *, int, void *, int, size_t, DType,
                         void *) override {
    return ++started_;
  }
  void wait(uint64_t handle) override {
    waited_.push_back(handle);
    if (handle >= failAt_)
      throw Error("a peer died");
  }
  const std::vector<uint64_t> &waited() const { return waited_; }

private:
  uint64_t failAt_;
  uint64_t started_ = 0;
  std::vector<uint64_t> waited_;
};

TEST(DataParallel, AFailedRunAbandonsItsCollectivesInFlight) {
  Program program = dataParallel(1, 1);
  const fb::Program &flatbuffer = flatbufferOf(program);
  std::vector<Tensor> parameters;
  for (const ParameterSpec &spec : program.parameters())
    parameters.emplace_back(spec.dtype, spec.shape);
  CpuModule module(flatbuffer);
  // Command 0 starts an async all_gather on submesh 0; command 1's
  // all_reduce on submesh 1 fails while the all_gather is in flight.
  auto shard = std::make_unique<FailingGroup>(UINT64_MAX);
  FailingGroup &inFlight = *shard;
  SubmeshGroups groups;
  groups.indices = {0, 0, 0};
  groups.groups.push_back(std::move(shard));
  groups.groups.push_back(std::make_unique<FailingGroup>(1));
  groups.groups.push_back(std::make_unique<FailingGroup>(UINT64_MAX));
  DeviceOptions options;
  ThreadPool pool(1);
  CpuEntry entry(flatbuffer, *flatbuffer.entries()->Get(0), parameters, module,
                 groups, options, pool, nullptr);
  EXPECT_THROW(entry.execute(), Error);
  try {
    entry.execute();
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "entry 'step': an earlier run failed while collectives were in "
              "flight, so their buffers may still be written; this Session "
              "cannot run the entry again");
  }
  // The all_gather in flight was never waited for: abandoning never blocks.
  EXPECT_TRUE(inFlight.waited().empty());
}

/// A group of four ranks (this one at index 1) that records each exchange
/// it is asked to start.
class RecordingGroup : public comm::Group {
public:
  struct Exchange {
    const void *send;
    int sendTo;
    void *recv;
    int recvFrom;
    size_t count;
  };
  int rank() const override { return 1; }
  int size() const override { return 4; }
  uint64_t start(comm::CollectiveKind, const void *, void *, size_t, DType,
                 comm::ReduceOp, void *) override {
    ADD_FAILURE() << "a point-to-point transfer runs through startExchange";
    return 0;
  }
  uint64_t startExchange(const void *send, int sendTo, void *recv, int recvFrom,
                         size_t count, DType, void *) override {
    exchanges.push_back({send, sendTo, recv, recvFrom, count});
    return exchanges.size();
  }
  std::vector<uint64_t> startTransfers(const std::vector<Transfer> &transfers,
                                       void *stream) override {
    batches.push_back(transfers);
    return Group::startTransfers(transfers, stream);
  }
  void wait(uint64_t handle) override { waited.push_back(handle); }
  std::vector<Exchange> exchanges;
  std::vector<std::vector<Transfer>> batches;
  std::vector<uint64_t> waited;
};

// A pipeline's send goes to the rank its parameter names and receives
// nothing; a receive takes from that rank and sends nothing; each is
// completed by its Wait, not when it starts.
TEST(DataParallel, SendAndRecvAreOneSidedExchangesWithTheirPeer) {
  RecordingGroup group;
  CollectivesInFlight inFlight("entry 'train_step'", 4);
  float out[3] = {1, 2, 3}, in[3] = {0, 0, 0};
  inFlight.run({&group,
                comm::CollectiveKind::Send,
                comm::ReduceOp::Sum,
                DType::F32,
                3,
                out,
                out,
                /*async=*/true,
                0,
                {2, -1, 1}},
               nullptr);
  inFlight.run({&group,
                comm::CollectiveKind::Recv,
                comm::ReduceOp::Sum,
                DType::F32,
                3,
                in,
                in,
                /*async=*/true,
                1,
                {0, -1, 1}},
               nullptr);
  ASSERT_EQ(group.exchanges.size(), 2u);
  EXPECT_EQ(group.exchanges[0].send, out);
  EXPECT_EQ(group.exchanges[0].sendTo, 2);
  EXPECT_EQ(group.exchanges[0].recv, nullptr);
  EXPECT_EQ(group.exchanges[0].recvFrom, -1);
  EXPECT_EQ(group.exchanges[0].count, 3u);
  EXPECT_EQ(group.exchanges[1].send, nullptr);
  EXPECT_EQ(group.exchanges[1].sendTo, -1);
  EXPECT_EQ(group.exchanges[1].recv, in);
  EXPECT_EQ(group.exchanges[1].recvFrom, 0);
  EXPECT_TRUE(group.waited.empty());
  inFlight.wait(1);
  inFlight.wait(0);
  EXPECT_EQ(group.waited, (std::vector<uint64_t>{2, 1}));
}

// The transfers of a batch (params: peer, batch, size) are held until the
// last of them comes, then started together by one startTransfers; a
// transfer alone starts at once.
TEST(DataParallel, ABatchOfTransfersStartsTogetherWithItsLast) {
  RecordingGroup group;
  CollectivesInFlight inFlight("entry 'train_step'", 4);
  float act[3] = {1, 2, 3}, grad[3] = {0, 0, 0}, alone[3] = {4, 5, 6};
  auto call = [&](comm::CollectiveKind kind, float *buffer, uint32_t index,
                  std::vector<int64_t> params) {
    return CollectiveCall{
        &group, kind,   comm::ReduceOp::Sum, DType::F32, 3,
        buffer, buffer, /*async=*/true,      index,      std::move(params)};
  };
  inFlight.run(call(comm::CollectiveKind::Send, act, 0, {2, 7, 2}), nullptr);
  EXPECT_TRUE(group.batches.empty());
  inFlight.run(call(comm::CollectiveKind::Send, alone, 1, {0, -1, 1}), nullptr);
  ASSERT_EQ(group.batches.size(), 1u);
  EXPECT_EQ(group.batches[0].size(), 1u);
  inFlight.run(call(comm::CollectiveKind::Recv, grad, 2, {2, 7, 2}), nullptr);
  ASSERT_EQ(group.batches.size(), 2u);
  ASSERT_EQ(group.batches[1].size(), 2u);
  EXPECT_EQ(group.batches[1][0].send, act);
  EXPECT_EQ(group.batches[1][0].peer, 2);
  EXPECT_EQ(group.batches[1][1].send, nullptr);
  EXPECT_EQ(group.batches[1][1].recv, grad);
  EXPECT_EQ(group.batches[1][1].peer, 2);
  inFlight.wait(2);
  inFlight.wait(0);
  inFlight.wait(1);
  // The default startTransfers starts each as its own exchange.
  EXPECT_EQ(group.waited, (std::vector<uint64_t>{3, 2, 1}));

  // A transfer of nothing (no group) still counts toward its batch.
  CollectiveCall empty = call(comm::CollectiveKind::Send, act, 3, {2, 8, 2});
  empty.group = nullptr;
  empty.count = 0;
  inFlight.run(empty, nullptr);
  EXPECT_EQ(group.batches.size(), 2u);
  CollectiveCall last = call(comm::CollectiveKind::Recv, grad, 1, {2, 8, 2});
  inFlight.run(last, nullptr);
  ASSERT_EQ(group.batches.size(), 3u);
  EXPECT_EQ(group.batches[2].size(), 1u);
  inFlight.wait(3);
  inFlight.wait(1);
}

TEST(DataParallel, CApiGivesTheRank) {
  std::vector<uint8_t> bytes = buildArtifact(dataParallelProgram(1, 1));
  megrt_program *program = nullptr;
  megrt_session *session = nullptr;
  ASSERT_EQ(megrt_program_from_bytes(bytes.data(), bytes.size(), &program),
            MEGRT_OK);
  ASSERT_EQ(megrt_session_create(program, "cpu", 0, &session), MEGRT_OK)
      << megrt_last_error();
  EXPECT_EQ(megrt_session_rank(session), 0);
  EXPECT_EQ(megrt_session_world_size(session), 1);
  EXPECT_EQ(megrt_session_rank(nullptr), -1);
  megrt_session_destroy(session);
  megrt_program_destroy(program);
}

TEST(DataParallel, LaunchedRankWithoutALauncher) {
  // ctest runs this suite without mpirun.
  LaunchedRank launched = launchedRank();
  EXPECT_EQ(launched.rank, 0);
  EXPECT_EQ(launched.size, 1);
}

TEST(DataParallel, TheWorldMustHaveTheMeshsRanks) {
  EXPECT_EQ(constructionError(dataParallel(2, 2)),
            "the artifact's mesh @world [dp_outer=2, dp_shard=2] needs 4 "
            "ranks, but this run has 1 (single process; start it with "
            "mpirun -n 4)");
}

TEST(DataParallel, PiecesOfAnInitialisationAreSlicesOfIt) {
  for (InitKind kind : {InitKind::Normal, InitKind::Uniform, InitKind::Ones}) {
    ParameterSpec spec{"layer.w", DType::BF16, {3, 5}, true, kind,
                       0.5,       {},          false,  ""};
    Tensor whole(DType::BF16, {3, 5});
    initializeParameter(whole, spec, 42);
    std::vector<float> values = whole.toFloats();
    // Pieces of 7: the third holds element 14 and padding, the fourth only
    // padding.
    for (int64_t first : {0, 7, 14, 21}) {
      Tensor piece(DType::BF16, {7});
      initializeParameterPiece(piece, spec, 42, first, 15);
      Tensor copied(DType::F32, {7});
      copyParameterPiece(copied, whole, first);
      for (int64_t i = 0; i < 7; ++i) {
        float want = first + i < 15 ? values[first + i] : 0.0f;
        EXPECT_EQ(piece.toFloats()[i], want) << first << "+" << i;
        EXPECT_EQ(copied.toFloats()[i], want) << first << "+" << i;
      }
    }
  }
}

// Tensor parallelism: block b of n along a dimension is the slice of the
// whole initialisation that the dimension's indices [b * e, (b + 1) * e)
// select, for every dimension of a 3-d tensor.
TEST(DataParallel, BlocksOfAnInitialisationAreSlicesOfIt) {
  Shape full = {4, 6, 2};
  ParameterSpec spec{"layer.w", DType::F32, full, true, InitKind::Normal,
                     0.5,       {},         false, ""};
  Tensor whole(DType::F32, full);
  initializeParameter(whole, spec, 42);
  std::vector<float> values = whole.toFloats();
  for (int dim = 0; dim < 3; ++dim) {
    int64_t count = full[dim];
    for (int64_t blocks : {int64_t(1), int64_t(2), count}) {
      Shape shape = full;
      shape[dim] /= blocks;
      for (int64_t b = 0; b < blocks; ++b) {
        Tensor block(DType::F32, shape);
        initializeParameterBlock(block, spec, 42, full, dim, b);
        std::vector<float> got = block.toFloats();
        int64_t i = 0;
        for (int64_t x = 0; x < shape[0]; ++x)
          for (int64_t y = 0; y < shape[1]; ++y)
            for (int64_t z = 0; z < shape[2]; ++z, ++i) {
              int64_t at[3] = {x, y, z};
              at[dim] += b * shape[dim];
              EXPECT_EQ(got[i], values[(at[0] * 6 + at[1]) * 2 + at[2]])
                  << "dim " << dim << " block " << b << " of " << blocks;
            }
      }
    }
  }
}

// FSDP over tensor parallelism: piece p (of n elements) of block b is the
// flattened block's elements [p n, (p + 1) n), zero past its end.
TEST(DataParallel, PiecesOfBlocksAreSlicesOfTheBlocks) {
  Shape full = {4, 6};
  ParameterSpec spec{"layer.w", DType::F32, full, true, InitKind::Uniform,
                     0.5,       {},         false, ""};
  Tensor whole(DType::F32, full);
  initializeParameter(whole, spec, 7);
  std::vector<float> values = whole.toFloats();
  for (int dim = 0; dim < 2; ++dim)
    for (int64_t b = 0; b < 2; ++b) {
      // The block, flattened, from the whole by hand.
      std::vector<float> block;
      for (int64_t x = 0; x < 4; ++x)
        for (int64_t y = 0; y < 6; ++y)
          if ((dim == 0 ? x : y) / (full[dim] / 2) == b)
            block.push_back(values[x * 6 + y]);
      for (int64_t first : {0, 5, 10}) {
        Tensor piece(DType::F32, {5});
        initializeParameterPieceOfBlock(piece, spec, 7, full, dim, 2, b,
                                        first);
        for (int64_t i = 0; i < 5; ++i) {
          float want = first + i < 12 ? block[first + i] : 0.0f;
          EXPECT_EQ(piece.toFloats()[i], want)
              << "dim " << dim << " block " << b << " at " << first + i;
        }
      }
    }
}

TEST(DataParallel, ShardedInitIsThePieceOfTheFullInit) {
  // Pieces of 17 for 15 elements: two padding elements.
  Session session(dataParallel(1, 1, /*extraPadding=*/2), {"cpu", 7});
  std::vector<float> full = fullInitialValues("w", 7);
  std::vector<float> padded = full;
  padded.resize(17, 0.0f);
  EXPECT_EQ(session.parameter("w").toFloats(), padded);
  // The copy of a replicated parameter takes its piece.
  std::vector<float> source = session.parameter("full").toFloats();
  EXPECT_EQ(source, fullInitialValues("full", 7));
  source.resize(17, 0.0f);
  EXPECT_EQ(session.parameter("piece").toFloats(), source);
  // And follows it.
  std::vector<float> values = testValues(15, 4);
  session.setParameter("full", Tensor::fromFloats(DType::F32, {3, 5}, values));
  values.resize(17, 0.0f);
  EXPECT_EQ(session.parameter("piece").toFloats(), values);
}

TEST(DataParallel, FilesHoldFullTensors) {
  std::string path = tempPath("params.safetensors");
  Session session(dataParallel(1, 1, /*extraPadding=*/2), {"cpu", 3});
  std::vector<float> w = testValues(17, 5);
  session.setParameter("w", Tensor::fromFloats(DType::F32, {17}, w));
  session.saveParameters(path);
  std::map<std::string, Tensor> saved = readSafetensors(path);
  // The padding is dropped.
  ASSERT_EQ(saved.at("w").shape(), (Shape{3, 5}));
  EXPECT_EQ(saved.at("w").toFloats(),
            std::vector<float>(w.begin(), w.begin() + 15));
  EXPECT_EQ(saved.at("piece").shape(), (Shape{3, 5}));

  Session other(dataParallel(1, 1, /*extraPadding=*/2), {"cpu", 9});
  other.loadParameters(path);
  std::vector<float> reloaded(w.begin(), w.begin() + 15);
  reloaded.resize(17, 0.0f);
  EXPECT_EQ(other.parameter("w").toFloats(), reloaded);

  std::map<std::string, Tensor> pieces = saved;
  pieces["w"] = Tensor::fromFloats(DType::F32, {17}, w);
  std::string piecesPath = tempPath("pieces.safetensors");
  writeSafetensors(piecesPath, pieces);
  try {
    other.loadParameters(piecesPath);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "'" + piecesPath +
                  "': parameter 'w' has shape [17], expected [3,5]");
  }
}

TEST(DataParallel, SplitInputsTakeTheGlobalTensor) {
  Session session(dataParallel(1, 1));
  try {
    session.run("step", {{"x", Tensor(DType::F32, {3, 4})}});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "entry 'step': input 'x' is split over submesh 1 (1 ranks): "
              "expected the global shape [2,4] (2 rows per rank), found "
              "[3,4]");
  }
}

TEST(DataParallel, TraceShowsEachCollective) {
  std::string path = tempPath("trace.json");
  {
    SessionOptions options;
    options.traceFile = path;
    Session session(dataParallel(1, 1), options);
    session.run("step", {{"x", dataParallelInput(1, 1, 1)}});
  }
  std::vector<TraceEvent> events = readTraceEvents(path);
  std::vector<const TraceEvent *> collectives = eventsOf(events, "collective");
  ASSERT_EQ(collectives.size(), 7u);
  EXPECT_EQ(collectives[0]->name, "all_gather");
  EXPECT_EQ(collectives[0]->arg("axes").text, "dp_shard");
  EXPECT_EQ(jsonToInt64(collectives[0]->arg("bytes"), "bytes"), 15 * 4);
  EXPECT_EQ(collectives[0]->arg("async").boolean, true);
  EXPECT_EQ(collectives[1]->name, "all_reduce");
  EXPECT_EQ(collectives[1]->arg("reduce").text, "sum");
  EXPECT_EQ(collectives[2]->arg("reduce").text, "avg");
  EXPECT_EQ(collectives[3]->name, "reduce_scatter");
  EXPECT_EQ(collectives[4]->name, "shard_slice");
  EXPECT_EQ(collectives[6]->name, "wait");
  EXPECT_EQ(jsonToInt64(collectives[6]->arg("collective"), "collective"), 0);
  expectNestedInEntries(events);
}

} // namespace
} // namespace megrt::test
