// Master weights (init kind copy): a state parameter that follows its model
// weight until training state is loaded, and the verifier's checks of it.
#include "ArtifactBuilder.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "megrt/Error.h"
#include "megrt/HalfFloat.h"
#include "megrt/Safetensors.h"
#include "megrt/Session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace megrt::test {
namespace {

/// linearProgram() plus a bf16 weight "h" and its f32 master "h.master".
ProgramDesc withMaster() {
  ProgramDesc desc = linearProgram();
  desc.params.push_back({"h", fb::DType::bf16, {5}, fb::InitKind::normal, 1.0});
  ParamDesc master{"h.master", fb::DType::f32, {5}, fb::InitKind::copy};
  master.state = true;
  master.initSource = "h";
  desc.params.push_back(master);
  return desc;
}

Session masterSession(uint64_t seed = 0) {
  SessionOptions options;
  options.seed = seed;
  return Session(Program::fromBytes(buildArtifact(withMaster())), options);
}

/// The master equals the weight widened to f32.
void expectFollows(const Session &session) {
  std::vector<float> weight = session.parameter("h").toFloats();
  std::vector<float> master = session.parameter("h.master").toFloats();
  ASSERT_EQ(weight.size(), master.size());
  for (size_t i = 0; i < weight.size(); ++i)
    EXPECT_EQ(master[i], weight[i]) << "element " << i;
}

Tensor bf16Values(const std::vector<float> &values) {
  return Tensor::fromFloats(DType::BF16, {static_cast<int64_t>(values.size())},
                            values);
}

TEST(MasterWeights, FollowInitialisation) {
  Session session = masterSession(3);
  // normal(0, 1) draws: a master left at its zeros, or never rewritten
  // after a new initialisation, fails the comparison.
  std::vector<float> first = session.parameter("h").toFloats();
  EXPECT_TRUE(std::any_of(first.begin(), first.end(),
                          [](float value) { return value != 0.0f; }));
  expectFollows(session);
  session.initParameters(4);
  EXPECT_NE(session.parameter("h").toFloats(), first);
  expectFollows(session);
}

TEST(MasterWeights, FollowSetParameterAndLoadedWeights) {
  Session session = masterSession();
  session.setParameter("h", bf16Values({1, 2, 3, 4, 5}));
  expectFollows(session);
  EXPECT_EQ(session.parameter("h.master").toFloats()[4], 5.0f);

  Session other = masterSession(9);
  std::string weights = tempPath("master-weights.safetensors");
  other.saveParameters(weights);
  session.loadParameters(weights);
  expectFollows(session);
  EXPECT_EQ(session.parameter("h").toFloats(), other.parameter("h").toFloats());
}

TEST(MasterWeights, LoadedStateKeepsItsOwnMaster) {
  Session session = masterSession();
  Tensor master = Tensor::fromFloats(DType::F32, {5}, {0.5f, 1, 2, 3, 4});
  session.setParameter("h.master", master);
  std::string state = tempPath("master-state.safetensors");
  session.saveState(state);

  Session restored = masterSession(7);
  restored.loadState(state);
  EXPECT_EQ(restored.parameter("h.master").toFloats(), master.toFloats());
  EXPECT_NE(restored.parameter("h.master").toFloats(),
            restored.parameter("h").toFloats());
}

std::string errorAfter(const std::function<void(ProgramDesc &)> &breakIt) {
  ProgramDesc desc = withMaster();
  breakIt(desc);
  try {
    Program::fromBytes(buildArtifact(desc));
  } catch (const Error &error) {
    return error.what();
  }
  return "(loaded)";
}

TEST(MasterWeights, VerifierChecksTheSource) {
  EXPECT_EQ(errorAfter([](ProgramDesc &) {}), "(loaded)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[3].initSource = "x"; }),
            "parameter 'h.master': copies 'x', which is not a parameter");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[3].shape = {6}; }),
            "parameter 'h.master': copies 'h' of shape [5] but has shape [6]");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              ParamDesc copy = d.params[3];
              copy.name = "h.master2";
              copy.initSource = "h.master";
              d.params.push_back(copy);
            }),
            "parameter 'h.master2': copies 'h.master', which is itself a copy");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[0].initSource = "b"; }),
            "parameter 'w': init 'normal' names a source parameter 'b'");
}

} // namespace
} // namespace megrt::test
