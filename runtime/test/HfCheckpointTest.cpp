// Checkpoint directories in Hugging Face layout: sharded round trips, the
// removal of an earlier save's files, and every rejection of a bad index.
#include "HfCheckpoint.h"
#include "TestFiles.h"
#include "megrt/Error.h"
#include "megrt/Safetensors.h"

#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<std::pair<std::string, Tensor>> threeTensors() {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int i = 0; i < 3; ++i)
    tensors.emplace_back("layer." + std::to_string(i) + ".weight",
                         Tensor::fromFloats(DType::F32, {4, 8},
                                            testValues(32, i)));
  return tensors;
}

/// `tensors` streamed into directory `dir` as a save does: in the sink's
/// order, one at a time.
void writeDirectory(const std::string &dir,
                    const std::vector<std::pair<std::string, Tensor>> &tensors,
                    const std::string &config, uint64_t maxShardBytes) {
  std::vector<TensorInfo> infos;
  for (const auto &[name, tensor] : tensors)
    infos.push_back({name, tensor.dtype(), tensor.shape()});
  std::unique_ptr<TensorSink> sink =
      openCheckpointDirectory(dir, infos, config, maxShardBytes);
  for (size_t i : checkpointDirectoryOrder(infos, maxShardBytes))
    sink->add(tensors[i].second.data());
  sink->finish();
}

std::string freshDirectory(const std::string &name) {
  std::string dir = tempPath(name);
  fs::remove_all(dir);
  return dir;
}

std::string readError(const std::string &path) {
  try {
    readCheckpoint(path);
  } catch (const Error &error) {
    return error.what();
  }
  return "(read)";
}

void writeText(const std::string &path, const std::string &text) {
  writeBytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(HfCheckpoint, ShardsRoundTripWithIndexAndConfig) {
  std::string dir = freshDirectory("sharded");
  auto tensors = threeTensors();
  // 128 bytes a tensor, at most 200 a shard: one tensor per shard.
  writeDirectory(dir, tensors, "{\"model_type\":\"llama\"}", 200);
  for (const char *file :
       {"model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors",
        "model.safetensors.index.json", "config.json"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / file)) << file;
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors"));
  std::map<std::string, Tensor> read = readCheckpoint(dir);
  ASSERT_EQ(read.size(), 3u);
  for (const auto &[name, tensor] : tensors)
    EXPECT_EQ(read.at(name).toFloats(), tensor.toFloats()) << name;
  std::vector<uint8_t> index = readBytes(dir + "/model.safetensors.index.json");
  EXPECT_THAT(std::string(index.begin(), index.end()),
              HasSubstr("\"total_size\":384"));
}

TEST(HfCheckpoint, ASmallerSaveRemovesTheEarlierShards) {
  std::string dir = freshDirectory("resaved");
  writeDirectory(dir, threeTensors(), "", 200);
  writeDirectory(dir + "/", threeTensors(), "", 1000);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model.safetensors"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model-00001-of-00003.safetensors"));
  EXPECT_EQ(readCheckpoint(dir).size(), 3u);
}

TEST(HfCheckpoint, RejectsIndexesThatDisagreeWithTheShards) {
  std::string dir = freshDirectory("bad-index");
  writeDirectory(dir, threeTensors(), "", 200);
  std::string index = dir + "/model.safetensors.index.json";
  writeText(index, "{\"weight_map\":{\"layer.0.weight\":"
                   "\"../model-00001-of-00003.safetensors\"}}");
  EXPECT_THAT(readError(dir), HasSubstr("which is not a file name in the "
                                        "checkpoint's directory"));
  writeText(index, "{\"weight_map\":{\"layer.0.weight\":"
                   "\"model-00002-of-00003.safetensors\"}}");
  EXPECT_THAT(readError(dir),
              HasSubstr("has no tensor 'layer.0.weight', which"));
  writeText(index, "{\"weight_map\":{\"layer.0.weight\":"
                   "\"model-00001-of-00003.safetensors\",\"extra\":"
                   "\"model-00001-of-00003.safetensors\"}}");
  EXPECT_THAT(readError(dir), HasSubstr("has no tensor 'extra'"));
  writeText(index, "{\"metadata\":{}}");
  EXPECT_THAT(readError(dir), HasSubstr("with a \"weight_map\" object"));
  writeText(index, "{\"weight_map\":{\"layer.0.weight\":7}}");
  EXPECT_THAT(readError(dir), HasSubstr("expected a file name"));
  writeText(index, "{\"weight_map\":");
  EXPECT_THAT(readError(dir), HasSubstr("invalid JSON"));
}

// A save interrupted after some of its shards leaves the previous save's
// index over a mix of shards: reading it is an error, not a mixed model.
TEST(HfCheckpoint, RejectsShardsOfAnotherSave) {
  std::string dir = freshDirectory("mixed");
  auto tensors = threeTensors();
  writeDirectory(dir, tensors, "", 200);
  std::string shard = dir + "/model-00002-of-00003.safetensors";
  std::vector<uint8_t> earlier = readBytes(shard);
  tensors[1].second = Tensor::fromFloats(DType::F32, {4, 8}, testValues(32, 9));
  writeDirectory(dir, tensors, "", 200);
  EXPECT_EQ(readCheckpoint(dir).at("layer.1.weight").toFloats(),
            tensors[1].second.toFloats());
  writeBytes(shard, earlier);
  EXPECT_THAT(readError(dir),
              HasSubstr("model-00002-of-00003.safetensors' is from another "
                        "save than"));
}

TEST(HfCheckpoint, RejectsShardTensorsTheIndexDoesNotList) {
  std::string dir = freshDirectory("unlisted");
  writeDirectory(dir, threeTensors(), "", 1000);
  fs::rename(dir + "/model.safetensors",
             dir + "/model-00001-of-00001.safetensors");
  writeText(dir + "/model.safetensors.index.json",
            "{\"weight_map\":{\"layer.0.weight\":"
            "\"model-00001-of-00001.safetensors\"}}");
  EXPECT_THAT(readError(dir), HasSubstr("tensor 'layer.1.weight' is not "
                                        "listed in"));
}

TEST(HfCheckpoint, ADirectoryWithoutACheckpointIsAnError) {
  std::string dir = freshDirectory("empty");
  fs::create_directories(dir);
  EXPECT_THAT(readError(dir),
              HasSubstr("the directory holds neither model.safetensors nor "
                        "model.safetensors.index.json"));
}

} // namespace
} // namespace megrt::test
