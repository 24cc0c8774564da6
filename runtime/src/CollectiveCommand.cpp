// The artifact's Collective and Wait commands in the communicator's terms,
// and the async collectives an entry has in flight.
#include "CollectiveCommand.h"

#include "Fail.h"
#include "FbTypes.h"
#include "megrt/Collectives.h"

namespace megrt {
namespace {

comm::CollectiveKind toCommKind(const fb::Collective &collective) {
  // Verification named a known kind.
  return findCollective(toString(collective.kind()))->id;
}

} // namespace

CollectiveCall toCollectiveCall(const fb::Collective &collective,
                                uint32_t index, const SubmeshGroups &groups,
                                const void *src, void *dst) {
  // connectGroups made a group for every submesh such a collective uses.
  comm::Group *group = collective.count() > 0
                           ? groups.groups.at(collective.submesh()).get()
                           : nullptr;
  comm::ReduceOp op = collective.reduce() == fb::ReduceOp::avg
                          ? comm::ReduceOp::Avg
                      : collective.reduce() == fb::ReduceOp::max
                          ? comm::ReduceOp::Max
                          : comm::ReduceOp::Sum;
  return {group,
          toCommKind(collective),
          op,
          toDType(collective.dtype()),
          static_cast<size_t>(collective.count()),
          src,
          dst,
          collective.async(),
          index,
          collective.params()
              ? std::vector<int64_t>(collective.params()->begin(),
                                     collective.params()->end())
              : std::vector<int64_t>()};
}

SliceCopy toSliceCopy(const fb::Collective &slice,
                      const SubmeshGroups &groups) {
  uint64_t bytes = slice.count() * elementSize(toDType(slice.dtype()));
  auto index = static_cast<uint64_t>(groups.indices.at(slice.submesh()));
  return {index * bytes, bytes};
}

CollectivesInFlight::CollectivesInFlight(std::string where, size_t numCommands)
    : where_(std::move(where)), pending_(numCommands) {}

void CollectivesInFlight::beginRun() const {
  if (abandoned_)
    fail(where_, ": an earlier run failed while collectives were in flight, "
                 "so their buffers may still be written; this Session "
                 "cannot run the entry again");
}

void CollectivesInFlight::run(const CollectiveCall &call, void *stream) {
  if (!call.group)
    return;
  // A collective that failed may still be moving bytes.
  try {
    uint64_t handle;
    if (call.kind == comm::CollectiveKind::Shift) {
      // Each rank sends to the rank `offset` places on and receives from
      // the one `offset` places back, around the group.
      int size = call.group->size(), rank = call.group->rank();
      auto offset =
          static_cast<int>(((call.params.at(0) % size) + size) % size);
      handle = call.group->startExchange(
          call.src, (rank + offset) % size, call.dst,
          (rank - offset + size) % size, call.count, call.dtype, stream);
    } else if (call.kind == comm::CollectiveKind::Send ||
               call.kind == comm::CollectiveKind::Recv) {
      // One side of a transfer with the rank at index params[0] of the
      // group.
      int peer = static_cast<int>(call.params.at(0));
      bool send = call.kind == comm::CollectiveKind::Send;
      handle =
          call.group->startExchange(send ? call.src : nullptr, send ? peer : -1,
                                    send ? nullptr : call.dst, send ? -1 : peer,
                                    call.count, call.dtype, stream);
    } else {
      handle = call.group->start(call.kind, call.src, call.dst, call.count,
                                 call.dtype, call.op, stream);
    }
    if (call.async)
      pending_[call.index] = InFlight{call.group, handle};
    else
      call.group->wait(handle);
  } catch (...) {
    abandoned_ = true;
    throw;
  }
}

void CollectivesInFlight::wait(uint32_t collective) {
  std::optional<InFlight> &inFlight = pending_[collective];
  // Nothing to wait for when the collective had nothing to transfer.
  if (!inFlight)
    return;
  InFlight started = *inFlight;
  inFlight.reset();
  try {
    started.group->wait(started.handle);
  } catch (...) {
    abandoned_ = true;
    throw;
  }
}

void CollectivesInFlight::abandon() noexcept {
  for (std::optional<InFlight> &inFlight : pending_)
    if (inFlight) {
      abandoned_ = true;
      inFlight.reset();
    }
}

} // namespace megrt
