// Graph regions on the CPU: recorded on an entry's first run, replayed on
// later ones, with the results of running every command one by one.
#include "ArtifactBuilder.h"
#include "Device.h"
#include "FbTypes.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "cpu/CpuEntry.h"
#include "cpu/CpuModule.h"
#include "megrt/Session.h"

#include <gtest/gtest.h>

namespace megrt::test {
namespace {

Program layered() {
  return Program::fromBytes(
      buildArtifact(layeredProgram(MEGRT_TEST_KERNELS_1)));
}

std::map<std::string, Tensor> runStep(Session &session, uint32_t seed) {
  return session.run("step", {{"x", Tensor::fromFloats(DType::F32, {8},
                                                       testValues(8, seed))}});
}

TEST(GraphRegions, ReplaysMatchCommandByCommand) {
  SessionOptions withGraphs, withoutGraphs;
  withoutGraphs.cudaGraphs = false;
  Session graphs(layered(), withGraphs), plain(layered(), withoutGraphs);
  // Each run changes w inside a region, so a replay that repeated the
  // first run's results instead of its work would differ.
  for (uint32_t seed : {1, 2, 3}) {
    std::map<std::string, Tensor> got = runStep(graphs, seed);
    std::map<std::string, Tensor> want = runStep(plain, seed);
    for (const char *output : {"y", "z", "g"})
      EXPECT_EQ(got.at(output), want.at(output)) << output << ", run " << seed;
    EXPECT_EQ(graphs.parameter("w"), plain.parameter("w")) << "run " << seed;
  }
  // w = 1, then +1 per run.
  EXPECT_EQ(plain.parameter("w").toFloats(), std::vector<float>(8, 4.0f));
}

/// Runs entry "step" of layeredProgram() `runs` times on a CpuEntry and
/// returns {recordings, replays}.
std::pair<uint64_t, uint64_t> countGraphRuns(bool graphs, int runs) {
  Program program = layered();
  const fb::Program &flatbuffer = flatbufferOf(program);
  std::vector<Tensor> parameters;
  for (const ParameterSpec &spec : program.parameters())
    parameters.emplace_back(spec.dtype, spec.shape);
  CpuModule module(flatbuffer);
  DeviceOptions options;
  options.graphs = graphs;
  SubmeshGroups noGroups;
  ThreadPool pool(1);
  CpuEntry entry(flatbuffer, *flatbuffer.entries()->Get(0), parameters, module,
                 noGroups, options, pool, nullptr);
  for (int i = 0; i < runs; ++i)
    entry.execute();
  return {entry.graphRecordings(), entry.graphReplays()};
}

TEST(GraphRegions, EachRegionIsRecordedOnceThenReplayed) {
  // Two regions.
  EXPECT_EQ(countGraphRuns(true, 1), (std::pair<uint64_t, uint64_t>{2, 0}));
  EXPECT_EQ(countGraphRuns(true, 3), (std::pair<uint64_t, uint64_t>{2, 4}));
  EXPECT_EQ(countGraphRuns(false, 3), (std::pair<uint64_t, uint64_t>{0, 0}));
}

} // namespace
} // namespace megrt::test
