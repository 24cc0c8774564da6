//===- DistributedCheckpoint.h - per-rank shards and a commit record -----===//
//
// A distributed checkpoint is a directory: every rank writes the pieces of
// the parameters it holds the first copy of (ParameterStore::holdsFirstCopy)
// to its own file rank-NNNNN.safetensors, in parallel, and once every
// rank's file is durable, rank 0 writes the commit record checkpoint.json
// (megrt/Checkpoint.h): per tensor its dtype, whole shape and chunks (file,
// byte range, and the elements each holds as a PieceGeometry), the mesh,
// and the caller's metadata. Loading is a read plan: each rank reads, from
// the chunks that overlap its own pieces under its current layout, just
// those byte ranges, so a checkpoint saved on one mesh loads on any other.
// No rank holds more than its own pieces.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_DISTRIBUTEDCHECKPOINT_H
#define MEGRT_SRC_DISTRIBUTEDCHECKPOINT_H

#include "ParameterStore.h"
#include "megrt/Safetensors.h"

#include <map>
#include <string>

namespace megrt {

/// Writes the model weights (with `withState`, the training state too) of
/// every rank into directory `dir`, created if missing; an earlier
/// checkpoint there is un-committed first. Every rank must call it; a rank
/// that fails to write makes every rank throw, naming it, and the
/// checkpoint stays incomplete. It is the three steps below in a row.
void saveDistributedCheckpoint(
    const ParameterStore &store, const Program &program, const std::string &dir,
    bool withState, const std::map<std::string, std::string> &metadata);

/// What one rank writes of a checkpoint: the pieces it holds the first
/// copy of, as safetensors entries (their data in the store's tensors, or,
/// given `staging`, copied into it, so that training can go on while they
/// are written) and the elements each holds.
struct ShardSnapshot {
  std::vector<SafetensorsEntry> entries;
  std::vector<PieceGeometry> pieces;
  /// The bytes of the pieces' data.
  uint64_t bytes = 0;
};
ShardSnapshot snapshotShard(const ParameterStore &store, const Program &program,
                            bool withState, std::vector<uint8_t> *staging);

/// Step 1, collective: creates `dir` and un-commits a checkpoint there
/// (rank 0 removes its record, durably) before any shard is replaced.
void prepareDistributedCheckpoint(const ParameterStore &store,
                                  const std::string &dir);
/// Step 2, on any thread and without communication: writes this rank's
/// shard file into `dir` (none when the snapshot is empty), durably.
/// Returns the outcome that step 3 takes: the chunks it wrote, or the
/// error.
std::string writeShard(const std::string &dir, int rank,
                       const ShardSnapshot &snapshot);
/// Step 3, collective: once every rank has its outcome, rank 0 writes the
/// commit record; every rank throws if any rank failed, naming it.
void commitDistributedCheckpoint(
    const ParameterStore &store, const Program &program, const std::string &dir,
    bool withState, const std::map<std::string, std::string> &metadata,
    const std::string &outcome);

/// Loads the distributed checkpoint `dir` into this rank's pieces, as
/// loadCheckpointFile does a file (same checks, nothing written on error);
/// `metadata` receives the record's metadata. Needs no communication.
void loadDistributedCheckpoint(ParameterStore &store, const Program &program,
                               const std::string &dir, bool allowExtra,
                               bool withState, bool checkFiniteValues,
                               std::map<std::string, std::string> *metadata);

} // namespace megrt

#endif // MEGRT_SRC_DISTRIBUTEDCHECKPOINT_H
