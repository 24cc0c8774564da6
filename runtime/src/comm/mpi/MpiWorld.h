// MPI's world as the plugin presents it: a private duplicate of
// MPI_COMM_WORLD, split into host groups.
#ifndef MEGRT_SRC_COMM_MPI_MPIWORLD_H
#define MEGRT_SRC_COMM_MPI_MPIWORLD_H

#include "comm/Communicator.h"

#include <mpi.h>

namespace megrt::comm::mpi {

class MpiWorld : public World {
public:
  /// Expects initialiseMpi(). Duplicates MPI_COMM_WORLD (so that megrt's
  /// messages never match the application's) and finds the local rank
  /// among the ranks sharing this host's memory; both are blocking
  /// collectives, like MPI_Init itself.
  explicit MpiWorld(double timeoutSeconds);
  ~MpiWorld() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }
  std::string describe() const override { return description_; }

  /// Host groups only: CUDA groups are megrt's (NCCL, bootstrapped through
  /// this world). MPI_Comm_split blocks; a timed MPI_Ibarrier before it
  /// makes sure every rank has arrived, so a missing rank is a timeout
  /// error rather than a hang.
  std::unique_ptr<Group> split(int color, int key, MemorySpace space) override;
  void broadcast(void *data, size_t bytes, int root) override;
  void allGatherBytes(const void *in, void *out, size_t bytes) override;
  void barrier() override;

private:
  /// Starts a request with the lock held, then waits for it with the
  /// timeout; `what` names the operation in errors.
  template <typename Start> void runTimed(const char *what, Start start);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  int localRank_ = 0;
  double timeoutSeconds_;
  std::string description_;
};

} // namespace megrt::comm::mpi

#endif // MEGRT_SRC_COMM_MPI_MPIWORLD_H
