// Checkpoints in Hugging Face layout (see HfCheckpoint.h).
#include "HfCheckpoint.h"

#include <algorithm>

#include "Fail.h"
#include "FileIO.h"
#include "Json.h"
#include "megrt/Safetensors.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include <unistd.h>

namespace fs = std::filesystem;

namespace megrt {
namespace {

constexpr const char *kSingleFile = "model.safetensors";
constexpr const char *kIndexFile = "model.safetensors.index.json";
// transformers refuses safetensors files whose metadata lacks a format.
const std::map<std::string, std::string> kMetadata = {{"format", "pt"}};
/// The key, in a sharded save's index "metadata" and each shard's
/// "__metadata__", of the id that save wrote them all with: shards of two
/// saves under one index (a save interrupted after some of its shards) are
/// an error instead of a model that mixes them.
constexpr const char *kSaveIdKey = "megc_save_id";

/// An id no other save of this or another process writes: the time, the
/// process and a count.
std::string newSaveId() {
  static uint64_t count = 0;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return concat(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), "-",
      ::getpid(), "-", ++count);
}

/// A shard name from the index: a plain file name, so that an index cannot
/// send the reader outside the checkpoint's directory.
void checkShardName(const std::string &name, const std::string &index) {
  if (name.empty() || name.find('/') != std::string::npos ||
      name.find('\\') != std::string::npos || name == "." || name == "..")
    fail("'", index, "': weight_map names the file '", name,
         "', which is not a file name in the checkpoint's directory");
}

std::map<std::string, Tensor> readSharded(const fs::path &dir) {
  std::string index = (dir / kIndexFile).string();
  std::vector<uint8_t> bytes = readFile(index);
  JsonValue root;
  try {
    root = parseJson(std::string_view(
        reinterpret_cast<const char *>(bytes.data()), bytes.size()));
  } catch (const Error &error) {
    fail("'", index, "': ", error.what());
  }
  const JsonValue *map = nullptr;
  if (root.kind == JsonValue::Kind::Object)
    for (const auto &[key, value] : root.members)
      if (key == "weight_map")
        map = &value;
  if (!map || map->kind != JsonValue::Kind::Object)
    fail("'", index, "': expected an object with a \"weight_map\" object");
  // The id of the save that wrote the index, if it recorded one.
  std::string saveId;
  for (const auto &[key, value] : root.members)
    if (key == "metadata" && value.kind == JsonValue::Kind::Object)
      for (const auto &[field, text] : value.members)
        if (field == kSaveIdKey && text.kind == JsonValue::Kind::String)
          saveId = text.text;
  // Shard -> the tensors the index puts there.
  std::map<std::string, std::set<std::string>> shards;
  for (const auto &[name, file] : map->members) {
    if (file.kind != JsonValue::Kind::String)
      fail("'", index, "': weight_map[\"", name, "\"] is ", file.kindName(),
           ", expected a file name");
    checkShardName(file.text, index);
    shards[file.text].insert(name);
  }
  std::map<std::string, Tensor> tensors;
  for (const auto &[file, names] : shards) {
    std::string path = (dir / file).string();
    std::map<std::string, std::string> metadata;
    std::map<std::string, Tensor> shard = readSafetensors(path, &metadata);
    if (!saveId.empty() && metadata[kSaveIdKey] != saveId)
      fail("'", path, "' is from another save than '", index,
           "' (a save into the directory was interrupted after some of its "
           "shards): the checkpoint is incomplete");
    for (const std::string &name : names)
      if (!shard.count(name))
        fail("'", path, "': has no tensor '", name, "', which '", index,
             "' places there");
    for (auto &[name, tensor] : shard) {
      if (!names.count(name))
        fail("'", path, "': tensor '", name, "' is not listed in '", index,
             "' for this file");
      tensors.emplace(name, std::move(tensor));
    }
  }
  return tensors;
}

std::string shardName(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
                index + 1, count);
  return name;
}

bool isShardName(const std::string &name) {
  unsigned first, second;
  char tail[32];
  return std::sscanf(name.c_str(), "model-%5u-of-%5u.%31s", &first, &second,
                     tail) == 3 &&
         std::string(tail) == "safetensors";
}

/// Removes the checkpoint files of an earlier save that this one did not
/// write (after writing, so that a failed save leaves the old one whole).
void removeEarlierCheckpoint(const fs::path &dir,
                             const std::set<std::string> &written) {
  std::error_code error;
  std::vector<fs::path> stale;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if ((name == kSingleFile || name == kIndexFile || isShardName(name)) &&
        !written.count(name))
      stale.push_back(entry.path());
  }
  for (const fs::path &path : stale)
    fs::remove(path, error);
}

} // namespace

bool isCheckpointDirectory(const std::string &path) {
  std::error_code error;
  return (!path.empty() && path.back() == '/') ||
         fs::is_directory(path, error);
}

std::map<std::string, Tensor> readCheckpoint(const std::string &path) {
  if (!isCheckpointDirectory(path))
    return readSafetensors(path);
  fs::path dir(path);
  std::error_code error;
  if (fs::exists(dir / kIndexFile, error))
    return readSharded(dir);
  if (fs::exists(dir / kSingleFile, error))
    return readSafetensors((dir / kSingleFile).string());
  fail("'", path, "': the directory holds neither ", kSingleFile, " nor ",
       kIndexFile);
}

namespace {

/// The shards of a directory save: tensors fill them in the given order; a
/// tensor larger than the limit gets a shard of its own, as transformers
/// does. Each shard's tensors in the order its file holds them.
std::vector<std::vector<size_t>>
planShards(const std::vector<TensorInfo> &tensors, uint64_t maxShardBytes) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t shardBytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t bytes = tensors[i].bytes();
    if (shardBytes > 0 && shardBytes + bytes > maxShardBytes) {
      shards.emplace_back();
      shardBytes = 0;
    }
    shards.back().push_back(i);
    shardBytes += bytes;
  }
  for (std::vector<size_t> &shard : shards) {
    std::vector<TensorInfo> infos;
    for (size_t i : shard)
      infos.push_back(tensors[i]);
    std::vector<size_t> order = safetensorsOrder(infos);
    std::vector<size_t> sorted;
    for (size_t k : order)
      sorted.push_back(shard[k]);
    shard = std::move(sorted);
  }
  return shards;
}

class CheckpointDirectorySink : public TensorSink {
public:
  CheckpointDirectorySink(const std::string &dir,
                          const std::vector<TensorInfo> &tensors,
                          std::string config, uint64_t maxShardBytes)
      : root_(dir), tensors_(tensors), config_(std::move(config)),
        shards_(planShards(tensors, maxShardBytes)) {
    std::error_code error;
    fs::create_directories(root_, error);
    if (!fs::is_directory(root_, error))
      fail("cannot write the checkpoint directory '", dir,
           "': ", error ? error.message() : "not a directory");
    metadata_ = kMetadata;
    if (shards_.size() > 1) {
      // Every shard and the index carry one id, so that shards of an
      // interrupted save under an earlier index are refused on load.
      saveId_ = newSaveId();
      metadata_[kSaveIdKey] = saveId_;
    }
  }

  void add(const void *data) override {
    while (shard_ < shards_.size() && taken_ == shards_[shard_].size())
      closeShard();
    if (shard_ == shards_.size())
      fail("cannot write '", root_.string(),
           "': more tensors than the save lists");
    if (!sink_)
      openShard();
    sink_->add(data);
    ++taken_;
  }

  void finish() override {
    while (shard_ < shards_.size()) {
      if (taken_ != shards_[shard_].size())
        fail("cannot write '", root_.string(),
             "': ", shards_[shard_].size() - taken_, " tensors of shard ",
             shard_, " were not given");
      closeShard();
    }
    if (shards_.size() > 1) {
      // The index last: until it is replaced, the directory's index and
      // shards are the previous save's, and its id tells them apart.
      uint64_t totalBytes = 0;
      for (const TensorInfo &tensor : tensors_)
        totalBytes += tensor.bytes();
      std::string index =
          concat("{\"metadata\":{\"total_size\":", totalBytes, ",\"",
                 kSaveIdKey, "\":", quoteJson(saveId_), "},\"weight_map\":{");
      bool first = true;
      for (size_t s = 0; s < shards_.size(); ++s)
        for (size_t i : shards_[s]) {
          index += concat(first ? "" : ",", quoteJson(tensors_[i].name), ":",
                          quoteJson(fileName(s)));
          first = false;
        }
      index += "}}\n";
      writeFile((root_ / kIndexFile).string(), {{index.data(), index.size()}});
      written_.insert(kIndexFile);
    }
    removeEarlierCheckpoint(root_, written_);
    if (!config_.empty()) {
      std::string text = config_ + "\n";
      writeFile((root_ / "config.json").string(), {{text.data(), text.size()}});
    }
  }

private:
  std::string fileName(size_t shard) const {
    return shards_.size() == 1 ? kSingleFile : shardName(shard, shards_.size());
  }
  void openShard() {
    std::vector<TensorInfo> infos;
    for (size_t i : shards_[shard_])
      infos.push_back(tensors_[i]);
    sink_ =
        openSafetensors((root_ / fileName(shard_)).string(), infos, metadata_);
  }
  void closeShard() {
    if (!sink_)
      openShard();
    sink_->finish();
    sink_.reset();
    written_.insert(fileName(shard_));
    ++shard_;
    taken_ = 0;
  }

  fs::path root_;
  std::vector<TensorInfo> tensors_;
  std::string config_;
  std::vector<std::vector<size_t>> shards_;
  std::map<std::string, std::string> metadata_;
  std::string saveId_;
  std::set<std::string> written_;
  size_t shard_ = 0, taken_ = 0;
  std::unique_ptr<TensorSink> sink_;
};

} // namespace

std::vector<size_t>
checkpointDirectoryOrder(const std::vector<TensorInfo> &tensors,
                         uint64_t maxShardBytes) {
  std::vector<size_t> order;
  for (const std::vector<size_t> &shard : planShards(tensors, maxShardBytes))
    order.insert(order.end(), shard.begin(), shard.end());
  return order;
}

std::unique_ptr<TensorSink>
openCheckpointDirectory(const std::string &dir,
                        const std::vector<TensorInfo> &tensors,
                        const std::string &config, uint64_t maxShardBytes) {
  return std::make_unique<CheckpointDirectorySink>(dir, tensors, config,
                                                   maxShardBytes);
}

} // namespace megrt
