// Checkpoints on disk as a resuming run sees them: a safetensors file, or a
// distributed checkpoint (a directory of per-rank shard files and the
// commit record that lists them, written last).
#ifndef MEGRT_CHECKPOINT_H
#define MEGRT_CHECKPOINT_H

#include <string>

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

} // namespace megrt

#endif // MEGRT_CHECKPOINT_H
