// Graph regions and tracing on a CUDA device: regions captured into CUDA
// graphs on an entry's first run and replayed afterwards give the results
// of launching every command, and the trace shows device-timed events.
#include "ArtifactBuilder.h"
#include "CudaPrograms.h"
#include "SamplePrograms.h"
#include "TestDevices.h"
#include "TestFiles.h"
#include "TraceEvents.h"
#include "megrt/Error.h"
#include "megrt/Session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// kernelProgram() with its first three commands (add, the overlapping
/// copy, the copy out) and the two-launch scale_add as graph regions; the
/// reverse launch stays outside. Entry "copy": y = x, without regions.
ProgramDesc graphedKernelProgram() {
  ProgramDesc desc = kernelProgram();
  desc.entries[0].graphs = {{"sum", 0, 3}, {"scaled", 3, 1}};
  EntryDesc copy;
  copy.name = "copy";
  copy.inputs = {{"x", fb::DType::f32, {kN}}};
  copy.outputs = {{"y", fb::DType::f32, {kN}}};
  copy.buffers = {inputBuffer(0, {kN}), outputBuffer(0, {kN})};
  copy.commands = {CopyDesc{0, 1, 0, 0, kBytes}};
  desc.entries.push_back(copy);
  return desc;
}

Session cudaSession(const ProgramDesc &desc, bool graphs,
                    const std::string &trace = "") {
  SessionOptions options;
  options.device = "cuda";
  options.cudaGraphs = graphs;
  options.traceFile = trace;
  return Session(Program::fromBytes(buildArtifact(desc)), options);
}

Tensor values(uint32_t seed, const Shape &shape = {kN}) {
  return Tensor::fromFloats(DType::F32, shape,
                            testValues(numElements(shape, "test"), seed));
}

std::map<std::string, Tensor> runStep(Session &session, uint32_t seed) {
  return session.run("step", {{"x", values(seed)}, {"y", values(seed + 10)}});
}

class CudaGraphs : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason = deviceUnavailable("cuda");
    if (!reason.empty())
      GTEST_SKIP() << "CUDA unavailable: " << reason;
  }
};

TEST_F(CudaGraphs, ReplaysMatchLaunchByLaunch) {
  ProgramDesc desc = graphedKernelProgram();
  Session graphs = cudaSession(desc, true), plain = cudaSession(desc, false);
  // New inputs and parameters on every run: a replay reads the buffers'
  // current bytes.
  for (uint32_t seed : {1, 2, 3}) {
    graphs.setParameter("w", values(seed + 20));
    plain.setParameter("w", values(seed + 20));
    std::map<std::string, Tensor> got = runStep(graphs, seed);
    std::map<std::string, Tensor> want = runStep(plain, seed);
    for (const char *output : {"sum", "scaled", "reversed"})
      EXPECT_EQ(got.at(output), want.at(output)) << output << ", run " << seed;
  }

  // w += x inside a graph: each replay updates the parameter again.
  ProgramDesc accumulate = accumulateProgram();
  accumulate.entries[0].graphs = {{"accumulate", 0, 2}};
  Session accumulateGraphs = cudaSession(accumulate, true);
  Session accumulatePlain = cudaSession(accumulate, false);
  for (uint32_t seed : {4, 5, 6}) {
    std::map<std::string, Tensor> inputs = {{"x", values(seed)}};
    EXPECT_EQ(accumulateGraphs.run("accumulate", inputs).at("out"),
              accumulatePlain.run("accumulate", inputs).at("out"))
        << "run " << seed;
  }
  EXPECT_EQ(accumulateGraphs.parameter("w"), accumulatePlain.parameter("w"));
}

TEST_F(CudaGraphs, CapturesCublasLtMatmuls) {
  // The bias GEMM and the copy out as one graph; cuBLASLt's workspace was
  // allocated with the Session, as capture needs.
  ProgramDesc desc = linearProgram();
  desc.cuda = CudaModuleDesc{"sm_90", kEmptyPtx, {}};
  desc.entries[0].graphs = {{"linear", 0, 2}};
  Session graphs = cudaSession(desc, true), plain = cudaSession(desc, false);
  for (Session *session : {&graphs, &plain}) {
    session->setParameter("w", values(1, {4, 3}));
    session->setParameter("b", values(2, {3}));
  }
  for (uint32_t seed : {3, 4, 5}) {
    std::map<std::string, Tensor> inputs = {{"x", values(seed, {2, 4})}};
    EXPECT_EQ(graphs.run("forward", inputs).at("y"),
              plain.run("forward", inputs).at("y"))
        << "run " << seed;
  }
}

TEST_F(CudaGraphs, TraceShowsCapturesReplaysAndCommands) {
  std::string path = tempPath("trace.json");
  {
    Session session = cudaSession(graphedKernelProgram(), true, path);
    for (uint32_t seed : {1, 2, 3})
      runStep(session, seed);
  }
  std::vector<TraceEvent> events = readTraceEvents(path);
  // Per run: the entry, its two regions and the reverse launch.
  EXPECT_EQ(events.size(), 3u * 4);
  EXPECT_EQ(countEvents(events, "entry"), 3u);
  std::vector<std::string> graphs;
  for (const TraceEvent *graph : eventsOf(events, "graph")) {
    graphs.push_back(graph->name +
                     (graph->arg("capture").boolean ? " capture" : " replay"));
    // Device time of real work: never zero at the events' resolution.
    EXPECT_GT(graph->duration, 0.0) << graph->name;
  }
  EXPECT_THAT(graphs,
              ElementsAre("sum capture", "scaled capture", "sum replay",
                          "scaled replay", "sum replay", "scaled replay"));
  std::vector<const TraceEvent *> kernels = eventsOf(events, "kernel");
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[0]->name, "reverse");
  // Device clocks: one CUDA event tick (about 0.5 us) of rounding.
  expectNestedInEntries(events, /*slack=*/1.0);

  // Without graphs, the same artifact traces every command.
  {
    Session session = cudaSession(graphedKernelProgram(), false, path);
    runStep(session, 1);
  }
  events = readTraceEvents(path);
  EXPECT_EQ(events.size(), 1u + 5);
  EXPECT_EQ(countEvents(events, "graph"), 0u);
  EXPECT_EQ(countEvents(events, "copy"), 2u);
  expectNestedInEntries(events, /*slack=*/1.0);
}

TEST_F(CudaGraphs, TracingChangesNoResult) {
  ProgramDesc desc = graphedKernelProgram();
  Session traced = cudaSession(desc, true, tempPath("trace.json"));
  Session plain = cudaSession(desc, true);
  for (uint32_t seed : {1, 2}) {
    std::map<std::string, Tensor> got = runStep(traced, seed);
    std::map<std::string, Tensor> want = runStep(plain, seed);
    for (const char *output : {"sum", "scaled", "reversed"})
      EXPECT_EQ(got.at(output), want.at(output)) << output;
  }
}

TEST_F(CudaGraphs, FailedCaptureNamesTheRegionAndEndsTheCapture) {
  // Blocks of 1 x 1 x 65 threads (z is limited to 64) inside region "sum".
  ProgramDesc desc = graphedKernelProgram();
  desc.kernels[0].cudaLaunches[0].grid = {kN};
  desc.kernels[0].cudaLaunches[0].block = {1, 1, 65};
  Session session = cudaSession(desc, true);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      runStep(session, 1);
      ADD_FAILURE() << "the region was captured";
    } catch (const Error &error) {
      EXPECT_THAT(std::string(error.what()),
                  HasSubstr("entry 'step', graph region 'sum' (commands 0 to "
                            "2): "))
          << "attempt " << attempt;
    }
  }
  // The stream left capture mode: other work still runs on it.
  Tensor x = values(7);
  EXPECT_EQ(session.run("copy", {{"x", x}}).at("y"), x);
}

} // namespace
} // namespace megrt::test
