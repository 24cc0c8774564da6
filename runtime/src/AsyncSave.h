//===- AsyncSave.h - a training-state save that runs beside training -----===//
//
// The state is copied to host memory when the save starts (on the caller's
// thread, at a step boundary), then a background thread writes it while
// the caller runs further steps: one safetensors file (a program without
// a mesh), or this rank's shard of a distributed checkpoint, whose commit
// record is written when the save is finished (collectively, so every rank
// must finish it at the same point). The files are those a synchronous
// save writes, byte for byte.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_ASYNCSAVE_H
#define MEGRT_SRC_ASYNCSAVE_H

#include "DistributedCheckpoint.h"

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace megrt {

class AsyncSave {
public:
  /// Takes the snapshot and starts the writer. `distributed`: `path` is a
  /// distributed checkpoint's directory (prepared here, collectively);
  /// otherwise one file, for a program without a mesh.
  /// `staging` is the area the snapshot is copied into (reused from an
  /// earlier save: takeStaging()).
  AsyncSave(const ParameterStore &store, const Program &program,
            std::string path, bool distributed,
            std::map<std::string, std::string> metadata,
            std::vector<uint8_t> staging);
  /// Waits for the writer (an unfinished distributed checkpoint stays
  /// uncommitted).
  ~AsyncSave();
  AsyncSave(const AsyncSave &) = delete;
  AsyncSave &operator=(const AsyncSave &) = delete;

  const std::string &path() const { return path_; }
  /// Whether the writer is done (without waiting).
  bool written() const { return done_.load(); }
  /// Throws the writer's error if it is done and failed (no waiting, no
  /// communication).
  void check() const;
  /// Waits for the writer and completes the save (a distributed
  /// checkpoint's commit, collective); throws its error.
  void finish();
  /// The staging area, for the next save, once finished.
  std::vector<uint8_t> takeStaging() { return std::move(staging_); }
  /// The seconds the snapshot took (what the caller waited for).
  double snapshotSeconds() const { return snapshotSeconds_; }

private:
  const ParameterStore &store_;
  const Program &program_;
  std::string path_;
  bool distributed_;
  std::map<std::string, std::string> metadata_;
  std::vector<uint8_t> staging_;
  ShardSnapshot snapshot_;
  double snapshotSeconds_ = 0;
  /// The writer's outcome (writeShard's form), valid once done_.
  std::string outcome_;
  std::atomic<bool> done_{false};
  std::thread writer_;
};

} // namespace megrt

#endif // MEGRT_SRC_ASYNCSAVE_H
