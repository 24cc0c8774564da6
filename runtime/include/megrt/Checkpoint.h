// Checkpoints on disk as a resuming run sees them: a safetensors file, or a
// distributed checkpoint (a directory of per-rank shard files and the
// commit record that lists them, written last).
#ifndef MEGRT_CHECKPOINT_H
#define MEGRT_CHECKPOINT_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megrt {

/// The commit record of a distributed checkpoint, inside its directory: a
/// checkpoint is complete exactly when its record exists.
inline constexpr const char *kCommitRecordName = "checkpoint.json";

/// Whether `path` is a directory holding a commit record.
bool isDistributedCheckpoint(const std::string &path);

/// Checks that the checkpoint at `path` is complete without reading its
/// tensors: a safetensors file whose header and data are whole, or a
/// distributed checkpoint whose record parses and whose shard files hold
/// every byte range it lists. Throws megrt::Error naming what is missing.
void checkCheckpoint(const std::string &path);

/// A directory of numbered checkpoints as a training run keeps them: the
/// training state after step N as step-NNNNNNNN.safetensors (one rank) or
/// the distributed checkpoint step-NNNNNNNN/ (several).
class CheckpointDirectory {
public:
  explicit CheckpointDirectory(std::string dir) : dir_(std::move(dir)) {}
  const std::string &path() const { return dir_; }

  struct Entry {
    int64_t step;
    std::string path;
    bool distributed;
  };

  /// Where step `step` is saved (a distributed one's path ends in '/').
  std::string pathOf(int64_t step, bool distributed) const;
  /// Every checkpoint by step, oldest first, complete or not.
  std::vector<Entry> list() const;
  /// The newest complete checkpoint (checkCheckpoint), if any; `skipped`
  /// receives why each newer one was passed over.
  std::optional<Entry> newestComplete(std::vector<std::string> *skipped) const;
  /// Removes what saves killed before they finished left behind: files
  /// never renamed (.step-NNNNNNNN.safetensors.tmp-PID of another process)
  /// and distributed checkpoints never committed. Returns how many.
  int removeUnfinished() const;
  /// Deletes all but the newest `keep` complete checkpoints (whole files
  /// and committed directories; incomplete ones do not count).
  void keepNewest(int64_t keep) const;

private:
  std::string dir_;
};

} // namespace megrt

#endif // MEGRT_CHECKPOINT_H
