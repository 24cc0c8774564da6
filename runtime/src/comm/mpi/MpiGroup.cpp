// A host group of MPI ranks: nonblocking collectives on its communicator,
// completed by a timed wait.
#include "comm/mpi/MpiGroup.h"

#include "Fail.h"
#include "comm/mpi/MpiProcess.h"
#include "comm/mpi/MpiTypes.h"

#include <climits>

namespace megrt::comm::mpi {

MpiGroup::MpiGroup(MPI_Comm comm, int worldRank, int color,
                   double timeoutSeconds)
    : comm_(comm), worldRank_(worldRank), color_(color),
      timeoutSeconds_(timeoutSeconds) {
  std::unique_lock<std::mutex> lock = lockMpi();
  std::string object =
      concat("rank ", worldRank, ": the group of color ", color);
  checkMpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN),
           "MPI_Comm_set_errhandler", object);
  checkMpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", object);
  checkMpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", object);
}

MpiGroup::~MpiGroup() {
  std::unique_lock<std::mutex> lock = lockMpi();
  // After a failure the communicator may have abandoned requests, and after
  // MPI_Finalize it is gone.
  if (!mpiBroken() && !mpiFinalized())
    MPI_Comm_free(&comm_);
}

std::string MpiGroup::describe(CollectiveKind kind, DType dtype, ReduceOp op,
                               size_t count) const {
  return concat("rank ", worldRank_, ": ",
                describeCollective(kind, dtype, op, count, size_), " (color ",
                color_, ")");
}

uint64_t MpiGroup::start(CollectiveKind kind, const void *src, void *dst,
                         size_t count, DType dtype, ReduceOp op, void *) {
  checkCollective(kind, dtype, op, count, size_);
  Pending pending;
  pending.what = describe(kind, dtype, op, count);
  if (count > static_cast<size_t>(INT_MAX))
    fail(pending.what,
         ": MPI counts are ints; split the collective into "
         "pieces of at most ",
         INT_MAX, " elements");
  pending.dst = dst;
  pending.count = count;
  pending.dtype = dtype;
  pending.average = collectiveInfo(kind).reduces && op == ReduceOp::Avg;
  if (kind == CollectiveKind::AllToAll && src == dst && count && size_ > 1)
    fail(pending.what, ": an all-to-all cannot run in place (src == dst)");

  std::unique_lock<std::mutex> lock = lockMpi();
  checkMpiUsable(pending.what);
  MPI_Datatype type = mpiDatatype(dtype);
  int n = static_cast<int>(count);
  switch (kind) {
  case CollectiveKind::AllGather: {
    // In place when this rank's part already sits in dst.
    const void *ownPart =
        static_cast<const char *>(dst) + rank_ * count * elementSize(dtype);
    checkMpi(MPI_Iallgather(src == ownPart ? MPI_IN_PLACE : src, n, type, dst,
                            n, type, comm_, &pending.request),
             "MPI_Iallgather", pending.what);
    break;
  }
  case CollectiveKind::ReduceScatter:
    // In place, dst holds all size() pieces and receives its own first.
    checkMpi(MPI_Ireduce_scatter_block(src == dst ? MPI_IN_PLACE : src, dst, n,
                                       type, mpiReduction(dtype, op), comm_,
                                       &pending.request),
             "MPI_Ireduce_scatter_block", pending.what);
    break;
  case CollectiveKind::AllReduce:
    checkMpi(MPI_Iallreduce(src == dst ? MPI_IN_PLACE : src, dst, n, type,
                            mpiReduction(dtype, op), comm_, &pending.request),
             "MPI_Iallreduce", pending.what);
    break;
  case CollectiveKind::AllToAll:
    checkMpi(MPI_Ialltoall(src, n, type, dst, n, type, comm_,
                           &pending.request),
             "MPI_Ialltoall", pending.what);
    break;
  case CollectiveKind::Slice: // a local copy, refused by checkCollective
    break;
  case CollectiveKind::Shift:
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    fail(pending.what, ": a ", collectiveName(kind),
         " runs through startExchange, which names its peers");
  }
  return pending_.add(std::move(pending));
}

uint64_t MpiGroup::startExchange(const void *send, int sendTo, void *recv,
                                 int recvFrom, size_t count, DType dtype,
                                 void *) {
  checkExchange(dtype, count, sendTo, recvFrom, size_);
  Pending pending;
  pending.what = concat("rank ", worldRank_, ": ",
                        describeExchange(dtype, count, sendTo, recvFrom, size_),
                        " (color ", color_, ")");
  if (count > static_cast<size_t>(INT_MAX))
    fail(pending.what,
         ": MPI counts are ints; split the exchange into pieces "
         "of at most ",
         INT_MAX, " elements");
  std::unique_lock<std::mutex> lock = lockMpi();
  checkMpiUsable(pending.what);
  MPI_Datatype type = mpiDatatype(dtype);
  int n = static_cast<int>(count);
  // One tag for every exchange: messages between two ranks of a
  // communicator arrive in the order they were sent, which is the order
  // both ranks issue their exchanges in.
  constexpr int kTag = 7;
  if (recvFrom >= 0)
    checkMpi(MPI_Irecv(recv, n, type, recvFrom, kTag, comm_, &pending.second),
             "MPI_Irecv", pending.what);
  if (sendTo >= 0)
    checkMpi(MPI_Isend(send, n, type, sendTo, kTag, comm_, &pending.request),
             "MPI_Isend", pending.what);
  return pending_.add(std::move(pending));
}

void MpiGroup::wait(uint64_t handle) {
  Pending pending;
  {
    std::unique_lock<std::mutex> lock = lockMpi();
    pending = pending_.take(
        handle, concat("rank ", worldRank_, ": the group of color ", color_));
  }
  if (pending.request != MPI_REQUEST_NULL)
    waitForRequest(pending.request, timeoutSeconds_, pending.what);
  if (pending.second != MPI_REQUEST_NULL)
    waitForRequest(pending.second, timeoutSeconds_, pending.what);
  if (pending.average)
    divideInPlace(pending.dst, pending.count, pending.dtype, size_);
}

} // namespace megrt::comm::mpi
