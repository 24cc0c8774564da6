// A host group of MPI ranks: nonblocking collectives on its communicator,
// completed by a timed wait.
#ifndef MEGRT_SRC_COMM_MPI_MPIGROUP_H
#define MEGRT_SRC_COMM_MPI_MPIGROUP_H

#include "comm/Collective.h"
#include "comm/Communicator.h"

#include <mpi.h>

#include <string>

namespace megrt::comm::mpi {

class MpiGroup : public Group {
public:
  /// Takes ownership of `comm`; `worldRank` and `color` are for messages.
  MpiGroup(MPI_Comm comm, int worldRank, int color, double timeoutSeconds);
  ~MpiGroup() override;
  MpiGroup(const MpiGroup &) = delete;
  MpiGroup &operator=(const MpiGroup &) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  uint64_t start(CollectiveKind kind, const void *src, void *dst, size_t count,
                 DType dtype, ReduceOp op, void *stream) override;
  uint64_t startExchange(const void *send, int sendTo, void *recv, int recvFrom,
                         size_t count, DType dtype, void *stream) override;
  void wait(uint64_t handle) override;

private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    /// An exchange's receive (its send is `request`).
    MPI_Request second = MPI_REQUEST_NULL;
    void *dst = nullptr;
    size_t count = 0;
    DType dtype = DType::F32;
    /// Avg is a sum divided once complete.
    bool average = false;
    std::string what;
  };

  /// "rank 1: all_reduce (sum, f32, 8 elements) on a group of 4 ranks
  /// (color 0)".
  std::string describe(CollectiveKind kind, DType dtype, ReduceOp op,
                       size_t count) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
  int worldRank_;
  int color_;
  double timeoutSeconds_;
  PendingCollectives<Pending> pending_;
};

} // namespace megrt::comm::mpi

#endif // MEGRT_SRC_COMM_MPI_MPIGROUP_H
