// A CUDA group: collectives of an NCCL communicator on the caller's
// stream, completed by a timed wait.
#ifndef MEGRT_SRC_COMM_NCCL_NCCLGROUP_H
#define MEGRT_SRC_COMM_NCCL_NCCLGROUP_H

#include "comm/Collective.h"
#include "comm/Communicator.h"

#include <cuda.h>
#include <nccl.h>

#include <functional>
#include <string>

namespace megrt::comm {

/// Collectives and waits use the CUDA context current on the calling thread,
/// which must be that of the device the communicator was made on.
class NcclGroup : public Group {
public:
  /// Takes ownership of `comm` (nonblocking, see NcclGroups.cpp);
  /// `worldRank` and `color` are for messages.
  NcclGroup(ncclComm_t comm, int worldRank, int color, double timeoutSeconds);
  ~NcclGroup() override;
  NcclGroup(const NcclGroup &) = delete;
  NcclGroup &operator=(const NcclGroup &) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  /// Enqueues the collective on `stream` (a CUstream) between two events.
  uint64_t start(CollectiveKind kind, const void *src, void *dst, size_t count,
                 DType dtype, ReduceOp op, void *stream) override;
  /// Enqueues the exchange (ncclSend and ncclRecv in one group) on
  /// `stream` between two events.
  uint64_t startExchange(const void *send, int sendTo, void *recv, int recvFrom,
                         size_t count, DType dtype, void *stream) override;
  /// Enqueues the transfers in one ncclGroupStart/End on `stream`
  /// between two events; they share one handle.
  std::vector<uint64_t> startTransfers(const std::vector<Transfer> &transfers,
                                       void *stream) override;
  /// Blocks the host until the collective's work on the GPU is done (its
  /// second event), polling NCCL for asynchronous errors; on an error or at
  /// the timeout, aborts the communicator and throws. Not for use while the
  /// stream is being captured into a CUDA graph.
  void wait(uint64_t handle) override;
  /// Enqueues the collective on `stream`, which is being captured into a
  /// CUDA graph: no events, no wait.
  void enqueueCaptured(CollectiveKind kind, const void *src, void *dst,
                       size_t count, DType dtype, ReduceOp op,
                       void *stream) override;

private:
  /// Enqueues `transfers` (checked) as one NCCL group between two events;
  /// `what` names them in errors and timeouts.
  uint64_t startGroupCall(const std::vector<Transfer> &transfers,
                          const std::string &what, void *stream);

  /// An event with timing, so that cuEventElapsedTime on the pair tells
  /// whether the second one completed (CUDA_ERROR_NOT_READY until then).
  class Event {
  public:
    explicit Event(const std::string &what);
    ~Event();
    Event(Event &&other) noexcept : event_(other.event_) {
      other.event_ = nullptr;
    }
    Event &operator=(Event &&other) noexcept;
    CUevent get() const { return event_; }

  private:
    CUevent event_ = nullptr;
  };

  struct Pending {
    Event begin, end;
    std::string what;
  };

  std::string describeGroup() const;
  /// Checks the collective and names it for messages.
  std::string describeCall(CollectiveKind kind, DType dtype, ReduceOp op,
                           size_t count) const;
  /// Enqueues the NCCL calls of the collective on `stream`.
  void issue(CollectiveKind kind, const void *src, void *dst, size_t count,
             DType dtype, ReduceOp op, CUstream stream,
             const std::string &what);
  /// Completes the enqueuing of NCCL calls whose last `call` returned
  /// `result` (a nonblocking communicator may still be enqueuing); aborts
  /// the communicator and throws on an error or at the timeout.
  void completeIssue(ncclResult_t result, const char *call,
                     const std::string &what);
  /// Runs `issue` on `stream` between the two events a pending operation
  /// is waited for by, and returns its handle.
  uint64_t startBetweenEvents(const std::string &what, CUstream stream,
                              const std::function<void()> &issue);
  /// Throws when an earlier failure aborted the communicator.
  void checkUsable(const std::string &what) const;

  /// Null once aborted.
  ncclComm_t comm_;
  int rank_ = 0;
  int size_ = 0;
  int worldRank_;
  int color_;
  double timeoutSeconds_;
  PendingCollectives<Pending> pending_;
};

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_NCCL_NCCLGROUP_H
