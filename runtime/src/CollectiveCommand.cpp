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
  CollectiveForm form = collectiveInfo(call.kind).form;
  bool transfer =
      form == CollectiveForm::Send || form == CollectiveForm::Receive;
  // A transfer of nothing still counts toward its batch.
  bool batched = transfer && call.params.size() > 2 && call.params[2] > 1;
  if (!call.group && !batched)
    return;
  // A collective that failed may still be moving bytes.
  try {
    uint64_t handle;
    if (form == CollectiveForm::Shift) {
      // Each rank sends to the rank `offset` places on and receives from
      // the one `offset` places back, around the group.
      int size = call.group->size(), rank = call.group->rank();
      auto offset =
          static_cast<int>(((call.params.at(0) % size) + size) % size);
      handle = call.group->startExchange(
          call.src, (rank + offset) % size, call.dst,
          (rank - offset + size) % size, call.count, call.dtype, stream);
    } else if (transfer) {
      std::optional<uint64_t> started = startTransfer(call, stream);
      // A batch's transfers are recorded when the batch starts.
      if (!started)
        return;
      handle = *started;
    } else {
      handle = call.group->start(call.kind, call.src, call.dst, call.count,
                                 call.dtype, call.op, stream);
    }
    if (call.async)
      pending_[call.index] = InFlight{call.group, handle, nullptr};
    else
      call.group->wait(handle);
  } catch (...) {
    abandoned_ = true;
    throw;
  }
}

std::optional<uint64_t>
CollectivesInFlight::startTransfer(const CollectiveCall &call, void *stream) {
  // One side of a transfer with the rank at index params[0] of the group;
  // params[1] and [2] name its batch and how many transfers it has (-1
  // and 1 alone).
  int peer = static_cast<int>(call.params.at(0));
  bool send = collectiveInfo(call.kind).form == CollectiveForm::Send;
  comm::Group::Transfer transfer{send ? call.src : nullptr,
                                 send ? nullptr : call.dst, peer, call.count,
                                 call.dtype};
  int64_t size = call.params.at(2);
  if (size <= 1)
    return call.group->startTransfers({transfer}, stream).front();
  Batch &batch = batches_[call.params.at(1)];
  if (call.group) {
    if (batch.group && batch.group != call.group)
      fail(where_, ", command ", call.index,
           ": a transfer batch spans two groups");
    batch.group = call.group;
    batch.stream = stream;
    batch.transfers.push_back(transfer);
    batch.commands.push_back(call.index);
  }
  if (++batch.arrived < size)
    return std::nullopt;
  Batch ready = std::move(batch);
  batches_.erase(call.params.at(1));
  if (ready.transfers.empty())
    return std::nullopt;
  std::vector<uint64_t> handles =
      ready.group->startTransfers(ready.transfers, ready.stream);
  // Transfers that share a handle complete together, by one wait (the
  // verifier made every batched transfer async).
  std::map<uint64_t, std::shared_ptr<bool>> shared;
  for (size_t i = 0; i < ready.commands.size(); ++i) {
    std::shared_ptr<bool> &waited = shared[handles[i]];
    if (!waited)
      waited = std::make_shared<bool>(false);
    pending_[ready.commands[i]] = InFlight{ready.group, handles[i], waited};
  }
  return std::nullopt;
}

void CollectivesInFlight::wait(uint32_t collective) {
  std::optional<InFlight> &inFlight = pending_[collective];
  // Nothing to wait for when the collective had nothing to transfer.
  if (!inFlight)
    return;
  InFlight started = *inFlight;
  inFlight.reset();
  if (started.waited && *started.waited)
    return;
  try {
    if (started.waited)
      *started.waited = true;
    started.group->wait(started.handle);
  } catch (...) {
    abandoned_ = true;
    throw;
  }
}

void CollectivesInFlight::abandon() noexcept {
  // Held transfers never started: nothing of theirs is moving.
  batches_.clear();
  for (std::optional<InFlight> &inFlight : pending_)
    if (inFlight) {
      abandoned_ = true;
      inFlight.reset();
    }
}

} // namespace megrt
