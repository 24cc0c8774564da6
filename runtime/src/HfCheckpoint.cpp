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

void writeCheckpointDirectory(
    const std::string &dir,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::string &config, uint64_t maxShardBytes) {
  fs::path root(dir);
  std::error_code error;
  fs::create_directories(root, error);
  if (!fs::is_directory(root, error))
    fail("cannot write the checkpoint directory '", dir,
         "': ", error ? error.message() : "not a directory");
  // Shards fill up in parameter order; a tensor larger than the limit gets
  // a shard of its own, as transformers does.
  std::vector<std::vector<std::pair<std::string, const Tensor *>>> shards(1);
  uint64_t shardBytes = 0, totalBytes = 0;
  for (const auto &[name, tensor] : tensors) {
    if (shardBytes > 0 && shardBytes + tensor->sizeBytes() > maxShardBytes) {
      shards.emplace_back();
      shardBytes = 0;
    }
    shards.back().emplace_back(name, tensor);
    shardBytes += tensor->sizeBytes();
    totalBytes += tensor->sizeBytes();
  }
  std::set<std::string> written;
  if (shards.size() == 1) {
    writeSafetensors((root / kSingleFile).string(), shards[0], kMetadata);
    written.insert(kSingleFile);
  } else {
    // The index last: until it is replaced, the directory's index and
    // shards are the previous save's, and its id tells them apart.
    std::string saveId = newSaveId();
    std::map<std::string, std::string> metadata = kMetadata;
    metadata[kSaveIdKey] = saveId;
    std::string index =
        concat("{\"metadata\":{\"total_size\":", totalBytes, ",\"", kSaveIdKey,
               "\":", quoteJson(saveId), "},\"weight_map\":{");
    bool first = true;
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string file = shardName(i, shards.size());
      writeSafetensors((root / file).string(), shards[i], metadata);
      written.insert(file);
      // Each shard's names in name order, as its file holds them.
      std::vector<std::string> names;
      for (const auto &entry : shards[i])
        names.push_back(entry.first);
      std::sort(names.begin(), names.end());
      for (const std::string &name : names) {
        index +=
            concat(first ? "" : ",", quoteJson(name), ":", quoteJson(file));
        first = false;
      }
    }
    index += "}}\n";
    writeFile((root / kIndexFile).string(), {{index.data(), index.size()}});
    written.insert(kIndexFile);
  }
  removeEarlierCheckpoint(root, written);
  if (!config.empty()) {
    std::string text = config + "\n";
    writeFile((root / "config.json").string(), {{text.data(), text.size()}});
  }
}

} // namespace megrt
