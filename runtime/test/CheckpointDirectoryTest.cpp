// A directory of numbered checkpoints: what a resuming run lists, which
// one it takes, what a saving run cleans up, and what --keep deletes.
#include "TestFiles.h"
#include "megrt/Checkpoint.h"
#include "megrt/Safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace megrt::test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> steps(const CheckpointDirectory &dir) {
  std::vector<int64_t> result;
  for (const CheckpointDirectory::Entry &entry : dir.list())
    result.push_back(entry.step);
  return result;
}

class CheckpointDirectoryTest : public ::testing::Test {
protected:
  void SetUp() override {
    root = tempPath("checkpoint_directory");
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void whole(int64_t step) {
    writeSafetensors(dir().pathOf(step, false),
                     {{"w", Tensor::fromFloats(DType::F32, {2}, {1, 2})}});
  }
  /// A distributed checkpoint with (committed) or without its record.
  void distributed(int64_t step, bool committed) {
    std::string path = dir().pathOf(step, true);
    fs::create_directories(path);
    if (committed)
      std::ofstream(path + kCommitRecordName)
          << R"({"format":"megc distributed checkpoint","version":1,)"
          << R"("mesh":"","metadata":{},"tensors":{},"chunks":[]})";
  }
  CheckpointDirectory dir() const { return CheckpointDirectory(root); }
  std::string root;
};

TEST_F(CheckpointDirectoryTest, ListsCheckpointsByStep) {
  whole(12);
  distributed(3, true);
  whole(7);
  std::ofstream(root + "/step-00000009.txt") << "not a checkpoint";
  std::ofstream(root + "/notes") << "neither";
  fs::create_directories(root + "/step-00000010.safetensors.d");
  EXPECT_THAT(steps(dir()), ElementsAre(3, 7, 12));
  EXPECT_EQ(dir().pathOf(3, true), root + "/step-00000003/");
  EXPECT_TRUE(dir().list()[0].distributed);
}

TEST_F(CheckpointDirectoryTest, TakesTheNewestCompleteOne) {
  whole(1);
  distributed(2, true);
  // Newer but incomplete: a file cut short, a directory without a record.
  whole(3);
  fs::resize_file(dir().pathOf(3, false), 20);
  distributed(4, false);
  std::vector<std::string> skipped;
  auto newest = dir().newestComplete(&skipped);
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->step, 2);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_THAT(skipped[0], HasSubstr("has no checkpoint.json"));
  EXPECT_THAT(skipped[1], HasSubstr("truncated"));
  fs::remove_all(dir().pathOf(2, true));
  fs::remove(dir().pathOf(1, false));
  EXPECT_FALSE(dir().newestComplete(nullptr));
}

TEST_F(CheckpointDirectoryTest, RemovesWhatUnfinishedSavesLeft) {
  whole(1);
  distributed(2, false);
  std::ofstream(root + "/.step-00000003.safetensors.tmp-999999") << "part";
  EXPECT_EQ(dir().removeUnfinished(), 2);
  EXPECT_THAT(steps(dir()), ElementsAre(1));
  EXPECT_FALSE(fs::exists(root + "/.step-00000003.safetensors.tmp-999999"));
}

TEST_F(CheckpointDirectoryTest, KeepsTheNewestCompleteOnes) {
  whole(1);
  distributed(2, true);
  whole(3);
  distributed(4, false); // incomplete: neither counted nor deleted
  dir().keepNewest(2);
  EXPECT_THAT(steps(dir()), ElementsAre(2, 3, 4));
}

} // namespace
} // namespace megrt::test
