// What every backend (single process, MPI, NCCL) checks about a collective
// before starting it, and the table of started collectives behind the
// handles start() returns.
#ifndef MEGRT_SRC_COMM_COLLECTIVE_H
#define MEGRT_SRC_COMM_COLLECTIVE_H

#include "comm/Communicator.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

namespace megrt::comm {

/// "all_reduce (sum, bf16, 1024 elements) on a group of 4 ranks", for
/// messages.
std::string describeCollective(CollectiveKind kind, DType dtype, ReduceOp op,
                               size_t count, int groupSize);

/// "<what> did not complete within N s; a peer rank may have died or
/// stalled (MEGRT_COMM_TIMEOUT sets the limit)": every backend's timeout.
std::string timeoutMessage(const std::string &what, double timeoutSeconds);

/// Throws megrt::Error unless every backend can run the collective: the
/// enums are in range, and reductions are sums or maxima of any dtype or
/// averages of floats (an integer average would need a rounding rule).
void checkCollective(CollectiveKind kind, DType dtype, ReduceOp op,
                     size_t count, int groupSize);

/// "exchange (f32, 8 elements: send to rank 2, receive from rank 0) on a
/// group of 4 ranks", for messages.
std::string describeExchange(DType dtype, size_t count, int sendTo,
                             int recvFrom, int groupSize);

/// Throws megrt::Error unless every backend can run the exchange: a valid
/// dtype, peers that are ranks of the group or -1, and one side at least.
void checkExchange(DType dtype, size_t count, int sendTo, int recvFrom,
                   int groupSize);

/// Elements of src and of dst for `count` as start() takes it.
size_t sourceCount(CollectiveKind kind, size_t count, int groupSize);
size_t destinationCount(CollectiveKind kind, size_t count, int groupSize);

/// Throws megrt::Error: `group` has no collective pending under `handle`.
[[noreturn]] void failUnknownCollectiveHandle(uint64_t handle,
                                              const std::string &group);

/// Started collectives by handle; handles are never reused, so waiting
/// twice for one is an error rather than a wait for another collective.
template <typename Pending> class PendingCollectives {
public:
  uint64_t add(Pending pending) {
    uint64_t handle = next_++;
    pending_.emplace(handle, std::move(pending));
    return handle;
  }

  /// Removes and returns the collective of `handle`; throws megrt::Error
  /// naming `group` when none is pending under it.
  Pending take(uint64_t handle, const std::string &group) {
    auto found = pending_.find(handle);
    if (found == pending_.end())
      failUnknownCollectiveHandle(handle, group);
    Pending pending = std::move(found->second);
    pending_.erase(found);
    return pending;
  }

  bool empty() const { return pending_.empty(); }

private:
  std::unordered_map<uint64_t, Pending> pending_;
  uint64_t next_ = 1;
};

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_COLLECTIVE_H
