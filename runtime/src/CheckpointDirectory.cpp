// A directory of numbered checkpoints (megrt/Checkpoint.h).
#include "megrt/Checkpoint.h"

#include "megrt/Error.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

namespace megrt {
namespace fs = std::filesystem;

namespace {
/// step-NNNNNNNN.safetensors, or step-NNNNNNNN for a distributed one.
std::string nameOf(int64_t step, bool distributed) {
  char name[64];
  std::snprintf(name, sizeof(name), "step-%08lld%s",
                static_cast<long long>(step),
                distributed ? "" : ".safetensors");
  return name;
}
} // namespace

std::string CheckpointDirectory::pathOf(int64_t step, bool distributed) const {
  return (fs::path(dir_) / nameOf(step, distributed)).string() +
         (distributed ? "/" : "");
}

std::vector<CheckpointDirectory::Entry> CheckpointDirectory::list() const {
  std::vector<Entry> found;
  std::error_code error;
  for (const auto &entry : fs::directory_iterator(dir_, error)) {
    std::string name = entry.path().filename().string();
    long long step = 0;
    if (std::sscanf(name.c_str(), "step-%8lld", &step) != 1)
      continue;
    bool distributed = entry.is_directory(error);
    if (name == nameOf(step, distributed))
      found.push_back({step, entry.path().string(), distributed});
  }
  std::sort(found.begin(), found.end(),
            [](const Entry &a, const Entry &b) { return a.step < b.step; });
  return found;
}

std::optional<CheckpointDirectory::Entry>
CheckpointDirectory::newestComplete(std::vector<std::string> *skipped) const {
  std::vector<Entry> all = list();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      checkCheckpoint(it->path);
      return *it;
    } catch (const Error &error) {
      if (skipped)
        skipped->push_back(error.what());
    }
  }
  return std::nullopt;
}

int CheckpointDirectory::removeUnfinished() const {
  int removed = 0;
  std::error_code error;
  for (const auto &entry : fs::directory_iterator(dir_, error)) {
    std::string name = entry.path().filename().string();
    long long step = 0, pid = 0;
    char tail[32];
    if (std::sscanf(name.c_str(), ".step-%8lld.%31[a-z].tmp-%lld", &step, tail,
                    &pid) == 3 &&
        std::string(tail) == "safetensors" && pid != ::getpid() &&
        fs::remove(entry.path(), error))
      ++removed;
  }
  for (const Entry &entry : list())
    if (entry.distributed && !isDistributedCheckpoint(entry.path) &&
        fs::remove_all(entry.path, error) > 0)
      ++removed;
  return removed;
}

void CheckpointDirectory::keepNewest(int64_t keep) const {
  std::vector<std::string> complete;
  for (const Entry &entry : list())
    if (!entry.distributed || isDistributedCheckpoint(entry.path))
      complete.push_back(entry.path);
  for (size_t i = 0; i + static_cast<size_t>(keep) < complete.size(); ++i)
    fs::remove_all(complete[i]);
}

} // namespace megrt
