// The world of a process started without a launcher (or as a world of
// one): it needs no MPI, and its host collectives are copies.
#ifndef MEGRT_SRC_COMM_SINGLEPROCESSWORLD_H
#define MEGRT_SRC_COMM_SINGLEPROCESSWORLD_H

#include "comm/Communicator.h"

namespace megrt::comm {

/// Rank 0 of 1. Host splits give groups of one rank; Cuda splits are left
/// to the caller (see RuntimeWorld).
class SingleProcessWorld : public World {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int localRank() const override { return 0; }
  std::string describe() const override { return "single process"; }

  std::unique_ptr<Group> split(int color, int key, MemorySpace space) override;
  void broadcast(void *data, size_t bytes, int root) override;
  void allGatherBytes(const void *in, void *out, size_t bytes) override;
  void barrier() override {}
};

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_SINGLEPROCESSWORLD_H
