// The trace a Session writes: one Chrome trace event per entry run, graph
// run and command outside graphs, read back with the runtime's JSON reader.
#include "ArtifactBuilder.h"
#include "Json.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "TraceEvents.h"
#include "megrt/Error.h"
#include "megrt/Session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

Program layered() {
  return Program::fromBytes(
      buildArtifact(layeredProgram(MEGRT_TEST_KERNELS_1)));
}

Session tracedSession(const std::string &path, bool graphs) {
  SessionOptions options;
  options.traceFile = path;
  options.cudaGraphs = graphs;
  return Session(layered(), options);
}

std::map<std::string, Tensor> runStep(Session &session, uint32_t seed) {
  return session.run("step", {{"x", Tensor::fromFloats(DType::F32, {8},
                                                       testValues(8, seed))}});
}

TEST(Trace, EventsNameWhatRan) {
  std::string path = tempPath("trace.json");
  {
    Session session = tracedSession(path, /*graphs=*/true);
    for (uint32_t seed : {1, 2, 3})
      runStep(session, seed);
  }
  std::vector<TraceEvent> events = readTraceEvents(path);
  // Per run: the entry, its two regions, and commands 0, 6, 7 and 8.
  ASSERT_EQ(events.size(), 3u * 7);
  EXPECT_EQ(countEvents(events, "entry"), 3u);
  EXPECT_EQ(countEvents(events, "graph"), 6u);
  EXPECT_EQ(countEvents(events, "copy"), 6u);
  EXPECT_EQ(countEvents(events, "kernel"), 3u);
  EXPECT_EQ(countEvents(events, "gemm"), 3u);
  expectNestedInEntries(events);

  std::vector<const TraceEvent *> graphs = eventsOf(events, "graph");
  std::vector<std::string> names;
  for (const TraceEvent *graph : graphs)
    names.push_back(graph->name +
                    (graph->arg("capture").boolean ? " capture" : " replay"));
  EXPECT_THAT(names,
              ::testing::ElementsAre("layers.0 capture", "layers.1 capture",
                                     "layers.0 replay", "layers.1 replay",
                                     "layers.0 replay", "layers.1 replay"));
  EXPECT_EQ(jsonToInt64(graphs[1]->arg("first_command"), "first"), 3);
  EXPECT_EQ(jsonToInt64(graphs[1]->arg("commands"), "commands"), 3);

  const TraceEvent &gemm = *eventsOf(events, "gemm")[0];
  EXPECT_EQ(gemm.name, "gemm");
  EXPECT_EQ(jsonToInt64(gemm.arg("command"), "command"), 8);
  EXPECT_EQ(jsonToInt64(gemm.arg("m"), "m"), 2);
  EXPECT_EQ(jsonToInt64(gemm.arg("n"), "n"), 2);
  EXPECT_EQ(jsonToInt64(gemm.arg("k"), "k"), 4);
  EXPECT_EQ(jsonToInt64(gemm.arg("batch"), "batch"), 1);
  EXPECT_EQ(gemm.arg("dtype").text, "f32");
  const TraceEvent &kernel = *eventsOf(events, "kernel")[0];
  EXPECT_EQ(kernel.name, "exp");
  EXPECT_EQ(jsonToInt64(kernel.arg("command"), "command"), 7);
  const TraceEvent &copy = *eventsOf(events, "copy")[0];
  EXPECT_EQ(jsonToInt64(copy.arg("bytes"), "bytes"), 32);
  const TraceEvent &entry = *eventsOf(events, "entry")[0];
  EXPECT_EQ(entry.name, "step");
  EXPECT_EQ(jsonToInt64(entry.arg("commands"), "commands"), 9);
  // Times count from the session's first event.
  EXPECT_EQ(entry.start, 0.0);
}

TEST(Trace, WithoutGraphsEveryCommandIsAnEvent) {
  std::string path = tempPath("trace.json");
  {
    Session session = tracedSession(path, /*graphs=*/false);
    runStep(session, 1);
    runStep(session, 2);
  }
  std::vector<TraceEvent> events = readTraceEvents(path);
  EXPECT_EQ(events.size(), 2u * (1 + 9));
  EXPECT_EQ(countEvents(events, "graph"), 0u);
  EXPECT_EQ(countEvents(events, "kernel"), 2u * 6);
  expectNestedInEntries(events);
}

TEST(Trace, TracingChangesNoResult) {
  Session traced = tracedSession(tempPath("trace.json"), /*graphs=*/true);
  Session plain(layered());
  for (uint32_t seed : {1, 2}) {
    std::map<std::string, Tensor> got = runStep(traced, seed);
    std::map<std::string, Tensor> want = runStep(plain, seed);
    for (const char *output : {"y", "z", "g"})
      EXPECT_EQ(got.at(output), want.at(output)) << output;
  }
}

TEST(Trace, WriteTraceWritesWhatRanSoFar) {
  std::string path = tempPath("trace.json");
  {
    Session session = tracedSession(path, /*graphs=*/true);
    runStep(session, 1);
    session.writeTrace();
    EXPECT_EQ(readTraceEvents(path).size(), 7u);
    runStep(session, 2);
  }
  // The destructor writes the complete trace.
  EXPECT_EQ(readTraceEvents(path).size(), 14u);
}

TEST(Trace, ClearTraceDropsEarlierRuns) {
  std::string path = tempPath("trace.json");
  {
    Session session = tracedSession(path, /*graphs=*/true);
    runStep(session, 1);
    session.clearTrace();
    runStep(session, 2);
    runStep(session, 3);
    session.writeTrace();
    EXPECT_EQ(readTraceEvents(path).size(), 14u);
    session.clearTrace();
  }
  // Cleared after the last write: the destructor writes the empty trace.
  EXPECT_EQ(readTraceEvents(path).size(), 0u);
  Session untraced(layered());
  try {
    untraced.clearTrace();
    FAIL() << "clearTrace without a trace file succeeded";
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(),
                 "clearTrace: tracing is off (set SessionOptions::traceFile)");
  }
}

TEST(Trace, WriteTraceErrors) {
  Session untraced(layered());
  try {
    untraced.writeTrace();
    FAIL() << "writeTrace without a trace file succeeded";
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(),
                 "writeTrace: tracing is off (set SessionOptions::traceFile)");
  }
  Session session = tracedSession(tempPath("missing-dir") + "/trace.json",
                                  /*graphs=*/true);
  try {
    session.writeTrace();
    FAIL() << "writeTrace into a missing directory succeeded";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("for writing"));
  }
}

} // namespace
} // namespace megrt::test
