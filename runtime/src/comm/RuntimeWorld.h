// The world connectWorld returns: host groups from the launcher's world
// (single process, or MPI through the plugin), CUDA groups through NCCL
// bootstrapped over it.
#ifndef MEGRT_SRC_COMM_RUNTIMEWORLD_H
#define MEGRT_SRC_COMM_RUNTIMEWORLD_H

#include "comm/Communicator.h"
#include "comm/CudaGroups.h"

#include <memory>
#include <mutex>

namespace megrt::comm {

class RuntimeWorld : public World {
public:
  RuntimeWorld(std::unique_ptr<World> host, double timeoutSeconds);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int localRank() const override { return host_->localRank(); }
  std::string describe() const override { return host_->describe(); }

  std::unique_ptr<Group> split(int color, int key, MemorySpace space) override;
  void broadcast(void *data, size_t bytes, int root) override {
    host_->broadcast(data, bytes, root);
  }
  void allGatherBytes(const void *in, void *out, size_t bytes) override {
    host_->allGatherBytes(in, out, bytes);
  }
  void barrier() override { host_->barrier(); }

private:
  std::unique_ptr<World> host_;
  double timeoutSeconds_;
  std::once_flag cudaOnce_;
  /// Made on the first CUDA split: NCCL is loaded only when needed.
  std::unique_ptr<CudaGroups> cuda_;
};

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_RUNTIMEWORLD_H
