// The CUDA groups of a world: NCCL communicators bootstrapped through the
// world's host helpers, whatever the world (single process or MPI).
#ifndef MEGRT_SRC_COMM_CUDAGROUPS_H
#define MEGRT_SRC_COMM_CUDAGROUPS_H

#include "comm/Communicator.h"

#include <memory>

namespace megrt::comm {

class CudaGroups {
public:
  virtual ~CudaGroups() = default;

  /// World::split for MemorySpace::Cuda: collective over the world.
  virtual std::unique_ptr<Group> split(int color, int key) = 0;
};

/// Defined by nccl/NcclGroups.cpp, or by NoCudaGroups.cpp in a build
/// without CUDA, whose split throws.
std::unique_ptr<CudaGroups> makeCudaGroups(World &world, double timeoutSeconds);

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_CUDAGROUPS_H
