// Loading artifacts: structure, identifier, version, truncation, corruption.
#include "ArtifactBuilder.h"
#include "megrt/ArtifactSeal.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "megrt/Error.h"
#include "megrt/FormatVersion.h"
#include "megrt/Program.h"
#include "megrt/Session.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string loadError(const std::vector<uint8_t> &bytes) {
  try {
    Program::fromBytes(bytes);
  } catch (const Error &error) {
    return error.what();
  }
  return "(loaded)";
}

TEST(ProgramLoad, DescribesAValidArtifact) {
  Program program = Program::fromBytes(buildArtifact(linearProgram()));
  EXPECT_EQ(program.formatVersion(), kFormatVersion);
  EXPECT_EQ(program.producer(), "megrt-test");
  ASSERT_EQ(program.parameters().size(), 2u);
  const ParameterSpec &w = program.parameters()[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.dtype, DType::F32);
  EXPECT_EQ(w.shape, (Shape{4, 3}));
  EXPECT_TRUE(w.trainable);
  EXPECT_EQ(w.initKind, InitKind::Normal);
  EXPECT_DOUBLE_EQ(w.initScale, 0.02);
  EXPECT_FALSE(w.sharding.has_value());
  EXPECT_EQ(program.findParameter("b"), std::optional<size_t>(1));
  EXPECT_EQ(program.findParameter("nope"), std::nullopt);

  ASSERT_EQ(program.entries().size(), 2u);
  const EntrySpec *forward = program.findEntry("forward");
  ASSERT_NE(forward, nullptr);
  ASSERT_EQ(forward->inputs.size(), 1u);
  EXPECT_EQ(forward->inputs[0].name, "x");
  EXPECT_EQ(forward->inputs[0].shape, (Shape{2, 4}));
  EXPECT_EQ(forward->outputs[0].shape, (Shape{2, 3}));
  EXPECT_EQ(forward->plan.arenaBytes, 128u);
  EXPECT_EQ(forward->plan.peakBytes, 24u);
  EXPECT_EQ(forward->numBuffers, 5u);
  EXPECT_EQ(forward->numCommands, 2u);
  EXPECT_EQ(program.findEntry("backward"), nullptr);
  EXPECT_FALSE(program.hasCpuModule());
  EXPECT_FALSE(program.hasCudaModule());
}

TEST(ProgramLoad, KeepsSharding) {
  ProgramDesc desc = linearProgram();
  desc.mesh = MeshDesc{"world", {{"dp_outer", 2}, {"dp_shard", 2}}};
  desc.submeshes = {{"dp_shard"}, {"dp_outer", "dp_shard"}};
  // b f32[3] becomes the piece of a [2,5] tensor over 4 ranks (3 x 4 >= 10).
  desc.params[1].sharding = ShardingDesc{1, {2, 5}};
  desc.params[1].trainable = false;
  Program program = Program::fromBytes(buildArtifact(desc));
  const ParameterSpec &b = program.parameters()[1];
  EXPECT_FALSE(b.trainable);
  ASSERT_TRUE(b.sharding.has_value());
  EXPECT_EQ(b.sharding->submesh, 1u);
  EXPECT_EQ(b.sharding->fullShape, (Shape{2, 5}));
  EXPECT_FALSE(program.parameters()[0].sharding.has_value());
}

TEST(ProgramLoad, KeepsTheMeshAndSubmeshes) {
  ProgramDesc desc = linearProgram();
  EXPECT_FALSE(Program::fromBytes(buildArtifact(desc)).mesh().has_value());
  desc.mesh = MeshDesc{"world", {{"dp_outer", 2}, {"dp_shard", 3}}};
  desc.submeshes = {{"dp_shard"}, {"dp_shard", "dp_outer"}};
  desc.entries[0].inputs[0].split = 0;
  Program program = Program::fromBytes(buildArtifact(desc));
  ASSERT_TRUE(program.mesh().has_value());
  EXPECT_EQ(program.mesh()->name, "world");
  ASSERT_EQ(program.mesh()->axes.size(), 2u);
  EXPECT_EQ(program.mesh()->axes[1].name, "dp_shard");
  EXPECT_EQ(program.mesh()->axes[1].size, 3);
  EXPECT_EQ(program.mesh()->numRanks, 6);
  EXPECT_EQ(program.describeMesh(), "@world [dp_outer=2, dp_shard=3]");
  ASSERT_EQ(program.submeshes().size(), 2u);
  EXPECT_EQ(program.submeshes()[1].axes,
            (std::vector<std::string>{"dp_shard", "dp_outer"}));
  EXPECT_EQ(program.submeshes()[1].axisIndices, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(program.submeshes()[0].size, 3);
  EXPECT_EQ(program.submeshes()[1].size, 6);
  EXPECT_EQ(program.findEntry("forward")->inputs[0].split,
            std::optional<uint32_t>(0));
  EXPECT_EQ(program.findEntry("identity")->inputs[0].split, std::nullopt);
}

TEST(ProgramLoad, LoadsFromFile) {
  std::string path = tempPath("model.megc");
  std::vector<uint8_t> bytes = buildArtifact(linearProgram());
  writeBytes(path, bytes);
  Program program = Program::load(path);
  ASSERT_EQ(program.size(), bytes.size());
  EXPECT_EQ(std::memcmp(program.bytes(), bytes.data(), bytes.size()), 0);
}

TEST(ProgramLoad, MissingFileNamesThePath) {
  std::string path = tempPath("absent.megc");
  try {
    Program::load(path);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot open '" + path + "'"));
  }
}

TEST(ProgramLoad, FileErrorsStartWithThePath) {
  std::string path = tempPath("bad.megc");
  std::vector<uint8_t> bytes = buildArtifact(linearProgram());
  std::memcpy(bytes.data() + 4, "ABCD", 4);
  writeBytes(path, bytes);
  try {
    Program::load(path);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_THAT(error.what(), StartsWith("'" + path + "': not a megc"));
  }
}

TEST(ProgramLoad, RejectsAnotherIdentifier) {
  std::vector<uint8_t> bytes = buildArtifact(linearProgram());
  std::memcpy(bytes.data() + 4, "ONNX", 4);
  EXPECT_EQ(loadError(bytes),
            "not a megc artifact: file identifier is 'ONNX', expected 'MEGC'");
  bytes[5] = 0x01;
  EXPECT_THAT(loadError(bytes), HasSubstr("'O\\x01NX'"));
}

TEST(ProgramLoad, RejectsAnotherFormatVersion) {
  ProgramDesc desc = linearProgram();
  std::string current = std::to_string(kFormatVersion);
  desc.formatVersion = kFormatVersion + 1;
  EXPECT_EQ(loadError(buildArtifact(desc)),
            "artifact format version " + std::to_string(kFormatVersion + 1) +
                ", this runtime reads " + current);
  desc.formatVersion = 0;
  EXPECT_EQ(loadError(buildArtifact(desc)),
            "artifact format version 0, this runtime reads " + current);
}

TEST(ProgramLoad, RejectsTruncatedFiles) {
  std::vector<uint8_t> bytes = buildArtifact(linearProgram());
  for (size_t length : {size_t(0), size_t(3), size_t(7)}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    EXPECT_EQ(loadError(cut),
              "megc artifact is truncated: " + std::to_string(length) +
                  " bytes is less than the 8-byte header");
  }
  for (size_t length :
       {size_t(8), size_t(12), size_t(16), size_t(24), bytes.size() / 4,
        bytes.size() / 2, bytes.size() * 3 / 4, bytes.size() - 8}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    EXPECT_THAT(loadError(cut),
                HasSubstr("megc artifact is truncated or corrupt: FlatBuffers "
                          "verification failed on its " +
                          std::to_string(length) + " bytes"))
        << "length " << length;
  }
}

TEST(ProgramLoad, EveryTruncationFailsCleanly) {
  // Only the builder's trailing alignment padding may be cut without loss.
  std::vector<uint8_t> bytes = buildArtifact(linearProgram());
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    std::string error = loadError(cut);
    if (length + 8 <= bytes.size()) {
      EXPECT_NE(error, "(loaded)") << "length " << length;
    }
  }
}

TEST(ProgramLoad, RejectsACorruptByteInTheMiddle) {
  std::vector<uint8_t> bytes = buildArtifact(linearProgram());
  // The length prefix of the string "identity", somewhere in the middle.
  const char *name = "identity";
  auto found = std::search(bytes.begin(), bytes.end(), name, name + 8);
  ASSERT_NE(found, bytes.end());
  size_t lengthAt = static_cast<size_t>(found - bytes.begin()) - 4;
  ASSERT_GT(lengthAt, bytes.size() / 8);
  ASSERT_LT(lengthAt, bytes.size() * 7 / 8);
  bytes[lengthAt + 2] = 0x7f;
  EXPECT_THAT(loadError(bytes),
              HasSubstr("megc artifact is truncated or corrupt"));
}

uint64_t bytesNeeded(const Program &program) {
  uint64_t total = 0;
  auto add = [&](DType dtype, const Shape &shape) {
    total += byteSize(dtype, shape, "test");
  };
  for (const ParameterSpec &param : program.parameters())
    add(param.dtype, param.shape);
  for (const EntrySpec &entry : program.entries()) {
    total += entry.plan.arenaBytes;
    for (const TensorSpec &spec : entry.inputs)
      add(spec.dtype, spec.shape);
    for (const TensorSpec &spec : entry.outputs)
      add(spec.dtype, spec.shape);
  }
  return total;
}

// Whatever a damaged byte does, loading either fails with megrt::Error or
// yields a program whose entries run inside their buffers.
TEST(ProgramLoad, EveryDamagedByteIsCaughtByTheChecksum) {
  std::vector<uint8_t> original = buildArtifact(linearProgram());
  for (size_t pos = 0; pos < original.size(); ++pos) {
    std::vector<uint8_t> bytes = original;
    bytes[pos] ^= 0x10;
    EXPECT_THROW(Program::fromBytes(bytes), Error) << "byte " << pos;
  }
}

TEST(ProgramLoad, EveryDamagedByteFailsCleanlyOrRunsSafely) {
  std::vector<uint8_t> original = buildArtifact(linearProgram());
  size_t sealAt = *checksumOffset(original.data());
  size_t rejected = 0, ran = 0;
  for (size_t pos = 0; pos < original.size(); ++pos) {
    for (uint8_t value :
         {uint8_t(0x00), uint8_t(0xff), uint8_t(original[pos] ^ 0x01),
          uint8_t(original[pos] ^ 0x80)}) {
      if (value == original[pos])
        continue;
      std::vector<uint8_t> bytes = original;
      bytes[pos] = value;
      // Re-sealed, so that the structural and semantic checks, not the
      // checksum, have to catch the damage.
      if (pos < sealAt || pos >= sealAt + 8) {
        uint64_t checksum = artifactChecksum(bytes.data(), bytes.size(), sealAt);
        for (int i = 0; i < 8; ++i)
          bytes[sealAt + i] = static_cast<uint8_t>(checksum >> (8 * i));
      }
      std::optional<Program> program;
      try {
        program = Program::fromBytes(bytes);
      } catch (const Error &) {
        ++rejected;
        continue;
      }
      uint64_t needed = 0;
      try {
        needed = bytesNeeded(*program);
      } catch (const Error &) {
        continue;
      }
      if (needed > (1u << 20))
        continue;
      Session session(*program);
      for (const EntrySpec &entry : program->entries()) {
        std::map<std::string, Tensor> inputs;
        for (const TensorSpec &spec : entry.inputs)
          inputs.emplace(spec.name, Tensor(spec.dtype, spec.shape));
        session.run(entry.name, inputs);
        ++ran;
      }
    }
  }
  EXPECT_GT(rejected, original.size());
  EXPECT_GT(ran, 0u);
}

} // namespace
} // namespace megrt::test
