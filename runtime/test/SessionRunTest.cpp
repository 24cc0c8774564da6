// Session::run: results through gemm, copy and arena, and input validation.
#include "ArtifactBuilder.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "megrt/Error.h"
#include "megrt/Session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

Session linearSession() {
  return Session(Program::fromBytes(buildArtifact(linearProgram())));
}

std::string runError(Session &session, std::string_view entry,
                     const std::map<std::string, Tensor> &inputs) {
  try {
    session.run(entry, inputs);
  } catch (const Error &error) {
    return error.what();
  }
  return "(ran)";
}

Tensor input(const Shape &shape, uint32_t seed) {
  return Tensor::fromFloats(DType::F32, shape,
                            testValues(numElements(shape, "x"), seed));
}

TEST(SessionRun, ComputesTheLinearLayer) {
  Session session = linearSession();
  std::vector<float> w = testValues(12, 1), b = {0.5f, -1.0f, 2.0f};
  session.setParameter("w", Tensor::fromFloats(DType::F32, {4, 3}, w));
  session.setParameter("b", Tensor::fromFloats(DType::F32, {3}, b));
  Tensor x = input({2, 4}, 2);
  std::vector<float> xs = x.toFloats();
  std::map<std::string, Tensor> outputs = session.run("forward", {{"x", x}});
  ASSERT_EQ(outputs.size(), 1u);
  const Tensor &y = outputs.at("y");
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double want = b[j];
      for (int p = 0; p < 4; ++p)
        want += double(xs[i * 4 + p]) * w[p * 3 + j];
      EXPECT_NEAR(y.dataAs<float>()[i * 3 + j], want, 1e-5) << i << "," << j;
    }
  // The caller's input is not modified, and a second run agrees.
  EXPECT_EQ(x.toFloats(), xs);
  EXPECT_EQ(session.run("forward", {{"x", x}}).at("y"), y);
}

// An artifact that declares a 4 TiB state tensor (as a resealed one may)
// is refused before anything is allocated or zero-filled, naming it.
TEST(SessionRun, DeclaredMemoryBeyondTheMachineIsRefused) {
  ProgramDesc desc = linearProgram();
  ParamDesc huge;
  huge.name = "optimizer.exp_avg.huge";
  huge.shape = {int64_t(1) << 40};
  huge.state = true;
  desc.params.push_back(huge);
  Program program = Program::fromBytes(buildArtifact(desc));
  try {
    Session session(program);
    FAIL() << "a Session of 4 TiB was made";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(),
                HasSubstr("the largest 'optimizer.exp_avg.huge' 4398.047 GB"));
    EXPECT_THAT(error.what(), HasSubstr("more than this machine's"));
    EXPECT_THAT(error.what(), HasSubstr("nothing was allocated"));
  }
}

TEST(SessionRun, EntriesAreIndependent) {
  Session session = linearSession();
  Tensor x = input({2, 4}, 3);
  EXPECT_EQ(session.run("identity", {{"x", x}}).at("y"), x);
  session.run("forward", {{"x", x}});
  EXPECT_EQ(session.run("identity", {{"x", x}}).at("y"), x);
}

// Running into one map: a result of the right dtype and shape is written
// in place (same storage, same values as a plain run); one of another shape
// is replaced, a name the entry does not produce removed, and a failed run
// leaves the map empty.
TEST(SessionRun, RunIntoKeepsTheOutputsStorage) {
  Session session = linearSession();
  Tensor x = input({2, 4}, 4), other = input({2, 4}, 5);
  std::map<std::string, Tensor> outputs;
  session.run("identity", {{"x", x}}, outputs);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs.at("y"), x);
  const uint8_t *storage = outputs.at("y").data();
  session.run("identity", {{"x", other}}, outputs);
  EXPECT_EQ(outputs.at("y").data(), storage);
  EXPECT_EQ(outputs.at("y"), session.run("identity", {{"x", other}}).at("y"));

  outputs.at("y") = Tensor(DType::F32, {3});
  outputs.emplace("stale", Tensor(DType::F32, {1}));
  session.run("forward", {{"x", x}}, outputs);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs.at("y"), session.run("forward", {{"x", x}}).at("y"));

  EXPECT_THROW(session.run("forward", {}, outputs), Error);
  EXPECT_TRUE(outputs.empty());
}

TEST(SessionRun, UnknownEntryListsTheEntries) {
  Session session = linearSession();
  EXPECT_EQ(runError(session, "backward", {}),
            "unknown entry 'backward'; the program has entries: forward, "
            "identity");
}

TEST(SessionRun, MissingInputIsNamed) {
  Session session = linearSession();
  EXPECT_EQ(runError(session, "forward", {}),
            "entry 'forward': missing input 'x' (expected f32[2,4])");
}

TEST(SessionRun, UnexpectedInputIsNamed) {
  Session session = linearSession();
  EXPECT_EQ(runError(session, "forward",
                     {{"x", input({2, 4}, 1)}, {"mask", input({2}, 1)}}),
            "entry 'forward': unexpected input 'mask'; expected inputs: x");
}

TEST(SessionRun, MisshapedInputNamesBothShapes) {
  Session session = linearSession();
  EXPECT_EQ(runError(session, "forward", {{"x", input({4, 2}, 1)}}),
            "entry 'forward': input 'x' has shape [4,2], expected [2,4]");
}

TEST(SessionRun, MistypedInputNamesBothDTypes) {
  Session session = linearSession();
  EXPECT_EQ(runError(session, "forward", {{"x", Tensor(DType::BF16, {2, 4})}}),
            "entry 'forward': input 'x' has dtype bf16, expected f32");
}

TEST(SessionRun, UnknownDevicesAreRejected) {
  std::vector<std::string> supported = supportedDevices();
  bool withCuda = supported.size() == 2;
  ASSERT_EQ(supported[0], "cpu");
  if (withCuda) {
    EXPECT_EQ(supported[1], "cuda");
  }
  std::string listed =
      withCuda ? "cpu, cuda (cuda:N selects CUDA device N)" : "cpu";
  std::vector<std::string> rejected = {"gpu",    "",      "tpu",
                                       "cuda:x", "cuda:", "cuda:-1",
                                       "CUDA",   "cpu:0", "cuda:1234567890",
                                       " cuda"};
  if (!withCuda)
    rejected.push_back("cuda");
  for (const std::string &device : rejected) {
    try {
      Session session(Program::fromBytes(buildArtifact(linearProgram())),
                      {device, 0});
      FAIL() << "device '" << device << "' was accepted";
    } catch (const Error &error) {
      EXPECT_EQ(std::string(error.what()),
                "unknown device '" + device +
                    "'; this runtime supports: " + listed);
    }
  }
}

TEST(SessionRun, ParameterAccessChecksNamesAndTypes) {
  Session session = linearSession();
  EXPECT_THROW(session.parameter("v"), Error);
  try {
    session.setParameter("w", Tensor(DType::F32, {3, 4}));
    FAIL() << "accepted a misshaped parameter";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "value for parameter 'w' has shape [3,4], expected [4,3]");
  }
  try {
    session.setParameter("nope", Tensor(DType::F32, {3, 4}));
    FAIL() << "accepted an unknown parameter";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()), "unknown parameter 'nope'");
  }
}

TEST(SessionRun, ArenaCarriesIntermediatesBetweenCommands) {
  // x -> arena@256 -> gemm with w into arena@0 -> gemm with v into arena@128
  // -> out: two chained matmuls through one arena.
  ProgramDesc program;
  program.params = {{"w", fb::DType::f32, {3, 3}, fb::InitKind::uniform, 1.0},
                    {"v", fb::DType::f32, {3, 2}, fb::InitKind::uniform, 1.0}};
  EntryDesc entry;
  entry.name = "mlp";
  entry.inputs = {{"x", fb::DType::f32, {2, 3}}};
  entry.outputs = {{"y", fb::DType::f32, {2, 2}}};
  entry.buffers = {inputBuffer(0, {2, 3}), arenaBuffer(256, {2, 3}),
                   paramBuffer(0, {3, 3}), arenaBuffer(0, {2, 3}),
                   paramBuffer(1, {3, 2}), arenaBuffer(128, {2, 2}),
                   outputBuffer(0, {2, 2})};
  GemmDesc first{1, 2, 3, -1, 2, 3, 3};
  GemmDesc second{3, 4, 5, -1, 2, 2, 3};
  entry.commands = {CopyDesc{0, 1, 0, 0, 24}, first, second,
                    CopyDesc{5, 6, 0, 0, 16}};
  entry.arenaBytes = 280;
  entry.peakBytes = 48;
  program.entries = {entry};
  Session session(Program::fromBytes(buildArtifact(program)), {"cpu", 17});

  std::vector<float> x = testValues(6, 9);
  std::vector<float> w = session.parameter("w").toFloats();
  std::vector<float> v = session.parameter("v").toFloats();
  std::vector<float> y =
      session.run("mlp", {{"x", Tensor::fromFloats(DType::F32, {2, 3}, x)}})
          .at("y")
          .toFloats();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double want = 0;
      for (int p = 0; p < 3; ++p) {
        double hidden = 0;
        for (int q = 0; q < 3; ++q)
          hidden += double(x[i * 3 + q]) * w[q * 3 + p];
        want += hidden * v[p * 2 + j];
      }
      EXPECT_NEAR(y[i * 2 + j], want, 1e-5);
    }
}

} // namespace
} // namespace megrt::test
