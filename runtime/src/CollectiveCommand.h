// The artifact's Collective and Wait commands in the communicator's terms,
// and the async collectives an entry has in flight.
#ifndef MEGRT_SRC_COLLECTIVECOMMAND_H
#define MEGRT_SRC_COLLECTIVECOMMAND_H

#include "MeshLayout.h"
#include "comm/Communicator.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace megrt {

/// A Collective command that communicates (not a slice) with its buffers
/// resolved: host addresses, or CUDA device addresses for a Cuda group.
struct CollectiveCall {
  /// Null when there is nothing to transfer (count 0).
  comm::Group *group;
  comm::CollectiveKind kind;
  comm::ReduceOp op;
  DType dtype;
  size_t count;
  const void *src;
  void *dst;
  bool async;
  /// The command's index in its entry, which its Wait names.
  uint32_t index;
  /// Its integer parameters (Collectives.def; a shift's offset).
  std::vector<int64_t> params;
};

CollectiveCall toCollectiveCall(const fb::Collective &collective,
                                uint32_t index, const SubmeshGroups &groups,
                                const void *src, void *dst);

/// What a slice copies: this rank's piece of its source, to the start of
/// its destination.
struct SliceCopy {
  uint64_t srcOffset;
  uint64_t bytes;
};

SliceCopy toSliceCopy(const fb::Collective &slice, const SubmeshGroups &groups);

/// An entry's async collectives between their start and their Wait.
class CollectivesInFlight {
public:
  /// `where` ("entry 'NAME'") prefixes errors.
  CollectivesInFlight(std::string where, size_t numCommands);

  /// Fails if an earlier run abandoned collectives: their buffers may
  /// still be written by the peers' transfers.
  void beginRun() const;
  /// Starts the collective; waits for it unless it is async. `stream` is
  /// the CUstream of a Cuda group (null for a Host group).
  void run(const CollectiveCall &call, void *stream);
  /// Completes the async collective of command `collective` (verification
  /// pairs each Wait with one earlier async collective).
  void wait(uint32_t collective);
  /// After a failed run: forgets the collectives still in flight, if any,
  /// and makes later runs fail. Never blocks.
  void abandon() noexcept;

private:
  struct InFlight {
    comm::Group *group;
    uint64_t handle;
    /// Set once the handle, shared by a batch's transfers, was waited for.
    std::shared_ptr<bool> waited;
  };
  /// The transfers of a batch (params[1]) issued so far, started together
  /// when the last (params[2] of them) comes.
  struct Batch {
    comm::Group *group = nullptr;
    void *stream = nullptr;
    std::vector<comm::Group::Transfer> transfers;
    std::vector<uint32_t> commands;
    /// Its transfers reached so far, those of nothing (no group) included.
    int64_t arrived = 0;
  };
  /// Starts a send or a receive alone and returns its handle, or holds it
  /// back for its batch and starts the batch with its last transfer
  /// (recording every transfer of it as in flight; none returned).
  std::optional<uint64_t> startTransfer(const CollectiveCall &call,
                                        void *stream);
  std::string where_;
  /// Per command.
  std::vector<std::optional<InFlight>> pending_;
  std::map<int64_t, Batch> batches_;
  bool abandoned_ = false;
};

} // namespace megrt

#endif // MEGRT_SRC_COLLECTIVECOMMAND_H
