// The world connectWorld returns: host groups from the launcher's world,
// CUDA groups through NCCL bootstrapped over it.
#include "comm/RuntimeWorld.h"

#include "comm/PeerWatch.h"

namespace megrt::comm {

RuntimeWorld::RuntimeWorld(std::unique_ptr<World> host, double timeoutSeconds)
    : host_(std::move(host)), timeoutSeconds_(timeoutSeconds) {
  // For the waits of CUDA groups; the MPI plugin watches for its own.
  if (host_->size() > 1)
    watchPeers(*host_);
}

std::unique_ptr<Group> RuntimeWorld::split(int color, int key,
                                           MemorySpace space) {
  if (space == MemorySpace::Host)
    return host_->split(color, key, space);
  std::call_once(cudaOnce_,
                 [&] { cuda_ = makeCudaGroups(*host_, timeoutSeconds_); });
  return cuda_->split(color, key);
}

} // namespace megrt::comm
