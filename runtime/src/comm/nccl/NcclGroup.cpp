// A CUDA group: collectives of an NCCL communicator on the caller's
// stream, completed by a timed wait.
#include "comm/nccl/NcclGroup.h"

#include "Fail.h"
#include "comm/nccl/NcclLibrary.h"
#include "cuda/CudaDriver.h"

#include <utility>

namespace megrt::comm {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  }
  fail("invalid dtype value ", static_cast<int>(dtype));
}

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

} // namespace

NcclGroup::Event::Event(const std::string &what) {
  checkCuda(cudaDriver().cuEventCreate(&event_, CU_EVENT_DEFAULT),
            "cuEventCreate", what);
}

NcclGroup::Event::~Event() {
  if (event_)
    cudaDriver().cuEventDestroy(event_);
}

NcclGroup::Event &NcclGroup::Event::operator=(Event &&other) noexcept {
  std::swap(event_, other.event_);
  return *this;
}

NcclGroup::NcclGroup(ncclComm_t comm, int worldRank, int color,
                     double timeoutSeconds)
    : comm_(comm), worldRank_(worldRank), color_(color),
      timeoutSeconds_(timeoutSeconds) {
  const NcclLibrary &library = nccl();
  checkNccl(library.ncclCommCount(comm_, &size_), "ncclCommCount", comm_,
            describeGroup());
  checkNccl(library.ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", comm_,
            describeGroup());
}

NcclGroup::~NcclGroup() {
  if (!comm_)
    return;
  // Errors cannot be reported from here: a communicator that does not
  // finalise in time is aborted instead.
  const NcclLibrary &library = nccl();
  try {
    checkNccl(library.ncclCommFinalize(comm_), "ncclCommFinalize", comm_,
              describeGroup());
    waitForNccl(comm_, deadlineAfter(timeoutSeconds_), timeoutSeconds_,
                describeGroup());
    library.ncclCommDestroy(comm_);
  } catch (const Error &) {
    // waitForNccl aborted the communicator, unless ncclCommFinalize failed.
  }
}

std::string NcclGroup::describeGroup() const {
  return concat("rank ", worldRank_, ": the CUDA group of color ", color_);
}

void NcclGroup::checkUsable(const std::string &what) const {
  if (!comm_)
    fail(what, ": the group's NCCL communicator was aborted after an earlier "
               "failure");
}

std::string NcclGroup::describeCall(CollectiveKind kind, DType dtype,
                                    ReduceOp op, size_t count) const {
  checkCollective(kind, dtype, op, count, size_);
  std::string what = concat("rank ", worldRank_, ": ",
                            describeCollective(kind, dtype, op, count, size_),
                            " (color ", color_, ", NCCL)");
  checkUsable(what);
  return what;
}

void NcclGroup::issue(CollectiveKind kind, const void *src, void *dst,
                      size_t count, DType dtype, ReduceOp op, CUstream cuStream,
                      const std::string &what) {
  const NcclLibrary &library = nccl();
  ncclDataType_t type = ncclType(dtype);
  ncclRedOp_t reduce = op == ReduceOp::Avg   ? ncclAvg
                       : op == ReduceOp::Max ? ncclMax
                                             : ncclSum;
  ncclResult_t result = ncclSuccess;
  const char *call = "";
  switch (kind) {
  case CollectiveKind::AllGather:
    call = "ncclAllGather";
    result = library.ncclAllGather(src, dst, count, type, comm_, cuStream);
    break;
  case CollectiveKind::ReduceScatter:
    call = "ncclReduceScatter";
    result = library.ncclReduceScatter(src, dst, count, type, reduce, comm_,
                                       cuStream);
    break;
  case CollectiveKind::AllReduce:
    call = "ncclAllReduce";
    result =
        library.ncclAllReduce(src, dst, count, type, reduce, comm_, cuStream);
    break;
  case CollectiveKind::AllToAll: {
    if (src == dst && count && size_ > 1)
      fail(what, ": an all-to-all cannot run in place (src == dst)");
    // One send and one receive per peer, fused into one group (NCCL's own
    // ncclAlltoAll is newer than the oldest library megrt loads).
    size_t chunk = count * elementSize(dtype);
    call = "ncclGroupStart";
    result = library.ncclGroupStart();
    for (int peer = 0; peer < size_ && result == ncclSuccess; ++peer) {
      call = "ncclSend";
      result = library.ncclSend(static_cast<const char *>(src) + peer * chunk,
                                count, type, peer, comm_, cuStream);
      if (result != ncclSuccess)
        break;
      call = "ncclRecv";
      result = library.ncclRecv(static_cast<char *>(dst) + peer * chunk, count,
                                type, peer, comm_, cuStream);
    }
    ncclResult_t ended = library.ncclGroupEnd();
    if (result == ncclSuccess) {
      call = "ncclGroupEnd";
      result = ended;
    }
    break;
  }
  case CollectiveKind::Slice: // a local copy, refused by checkCollective
    break;
  case CollectiveKind::Shift:
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    fail(what, ": a ", collectiveName(kind),
         " runs through startExchange, which cannot be captured into a CUDA "
         "graph yet");
  }
  completeIssue(result, call, what);
}

void NcclGroup::completeIssue(ncclResult_t result, const char *call,
                              const std::string &what) {
  // A nonblocking communicator may still be enqueuing: what follows on the
  // stream must come after the calls' work.
  try {
    completeNccl(result, call, comm_, deadlineAfter(timeoutSeconds_),
                 timeoutSeconds_, what);
  } catch (const Error &) {
    comm_ = nullptr;
    throw;
  }
}

uint64_t NcclGroup::startBetweenEvents(const std::string &what, CUstream stream,
                                       const std::function<void()> &issue) {
  const CudaDriver &driver = cudaDriver();
  Pending pending{Event(what), Event(what), what};
  checkCuda(driver.cuEventRecord(pending.begin.get(), stream), "cuEventRecord",
            what);
  issue();
  checkCuda(driver.cuEventRecord(pending.end.get(), stream), "cuEventRecord",
            what);
  return pending_.add(std::move(pending));
}

uint64_t NcclGroup::start(CollectiveKind kind, const void *src, void *dst,
                          size_t count, DType dtype, ReduceOp op,
                          void *stream) {
  std::string what = describeCall(kind, dtype, op, count);
  auto cuStream = static_cast<CUstream>(stream);
  return startBetweenEvents(what, cuStream, [&] {
    issue(kind, src, dst, count, dtype, op, cuStream, what);
  });
}

uint64_t NcclGroup::startExchange(const void *send, int sendTo, void *recv,
                                  int recvFrom, size_t count, DType dtype,
                                  void *stream) {
  checkExchange(dtype, count, sendTo, recvFrom, size_);
  std::vector<Transfer> transfers;
  if (sendTo >= 0)
    transfers.push_back({send, nullptr, sendTo, count, dtype});
  if (recvFrom >= 0)
    transfers.push_back({nullptr, recv, recvFrom, count, dtype});
  return startGroupCall(
      transfers,
      concat("rank ", worldRank_, ": ",
             describeExchange(dtype, count, sendTo, recvFrom, size_),
             " (color ", color_, ", NCCL)"),
      stream);
}

std::vector<uint64_t>
NcclGroup::startTransfers(const std::vector<Transfer> &transfers,
                          void *stream) {
  std::string described;
  for (const Transfer &t : transfers) {
    int sendTo = t.send ? t.peer : -1, recvFrom = t.send ? -1 : t.peer;
    checkExchange(t.dtype, t.count, sendTo, recvFrom, size_);
    described +=
        concat(described.empty() ? "" : ", ",
               describeExchange(t.dtype, t.count, sendTo, recvFrom, size_));
  }
  uint64_t handle = startGroupCall(
      transfers,
      concat("rank ", worldRank_, ": ", transfers.size(),
             " transfers together (", described, ") (color ", color_,
             ", NCCL)"),
      stream);
  return std::vector<uint64_t>(transfers.size(), handle);
}

uint64_t NcclGroup::startGroupCall(const std::vector<Transfer> &transfers,
                                   const std::string &what, void *stream) {
  checkUsable(what);
  auto cuStream = static_cast<CUstream>(stream);
  // One group call: NCCL matches each side with its peer's whichever comes
  // first, so no send waits for a receive queued behind it.
  return startBetweenEvents(what, cuStream, [&] {
    const NcclLibrary &library = nccl();
    const char *call = "ncclGroupStart";
    ncclResult_t result = library.ncclGroupStart();
    for (const Transfer &t : transfers) {
      if (result != ncclSuccess)
        break;
      if (t.send) {
        call = "ncclSend";
        result = library.ncclSend(t.send, t.count, ncclType(t.dtype), t.peer,
                                  comm_, cuStream);
      } else {
        call = "ncclRecv";
        result = library.ncclRecv(t.recv, t.count, ncclType(t.dtype), t.peer,
                                  comm_, cuStream);
      }
    }
    ncclResult_t ended = library.ncclGroupEnd();
    if (result == ncclSuccess) {
      call = "ncclGroupEnd";
      result = ended;
    }
    completeIssue(result, call, what);
  });
}

void NcclGroup::enqueueCaptured(CollectiveKind kind, const void *src, void *dst,
                                size_t count, DType dtype, ReduceOp op,
                                void *stream) {
  issue(kind, src, dst, count, dtype, op, static_cast<CUstream>(stream),
        describeCall(kind, dtype, op, count));
}

void NcclGroup::wait(uint64_t handle) {
  Pending pending = pending_.take(handle, describeGroup());
  checkUsable(pending.what);
  const CudaDriver &driver = cudaDriver();
  CUresult status = CUDA_ERROR_NOT_READY;
  auto finished = [&] {
    float milliseconds = 0;
    status = driver.cuEventElapsedTime(&milliseconds, pending.begin.get(),
                                       pending.end.get());
    return status != CUDA_ERROR_NOT_READY;
  };
  try {
    waitForNccl(comm_, deadlineAfter(timeoutSeconds_), timeoutSeconds_,
                pending.what, finished);
  } catch (const Error &) {
    comm_ = nullptr;
    throw;
  }
  checkCuda(status, "cuEventElapsedTime (waiting for the collective)",
            pending.what);
}

} // namespace megrt::comm
