// The CUDA groups of a world: one NCCL communicator over the world, made on
// the first CUDA split from rank 0's unique id (broadcast through the world,
// so a world of one gets its own id too), and split per group. Every NCCL
// communicator is nonblocking, so that initialisation and splits poll with
// the world's timeout instead of hanging when a peer is missing.
#include "Fail.h"
#include "comm/CudaGroups.h"
#include "comm/nccl/NcclGroup.h"
#include "comm/nccl/NcclLibrary.h"
#include "cuda/CudaDriver.h"

namespace megrt::comm {
namespace {

using Clock = std::chrono::steady_clock;

ncclConfig_t nonblockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

class NcclGroups : public CudaGroups {
public:
  NcclGroups(World &world, double timeoutSeconds)
      : world_(world), timeoutSeconds_(timeoutSeconds) {}

  std::unique_ptr<Group> split(int color, int key) override {
    std::string what =
        concat("rank ", world_.rank(), ": split of a CUDA group (color ", color,
               ", key ", key, ")");
    if (color < 0)
      fail(what, ": the color is negative; colors name groups and must be "
                 ">= 0");
    // The driver first: without it NCCL's own error is less clear.
    try {
      cudaDriver();
      nccl();
    } catch (const Error &error) {
      fail(what, ": ", error.what());
    }
    if (!worldComm_)
      connectWorldComm(what);

    // Every rank is here before NCCL starts talking (a timed barrier).
    world_.barrier();
    ncclConfig_t config = nonblockingConfig();
    ncclComm_t comm = nullptr;
    ncclResult_t result =
        nccl().ncclCommSplit(worldComm_, color, key, &comm, &config);
    auto deadline = deadlineAfter();
    try {
      completeNccl(result, "ncclCommSplit", worldComm_, deadline,
                   timeoutSeconds_, what);
    } catch (const Error &) {
      worldComm_ = nullptr;
      throw;
    }
    waitForNccl(comm, deadline, timeoutSeconds_, what);
    return std::make_unique<NcclGroup>(comm, world_.rank(), color,
                                       timeoutSeconds_);
  }

private:
  Clock::time_point deadlineAfter() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeoutSeconds_));
  }

  void connectWorldComm(const std::string &what) {
    const NcclLibrary &library = nccl();
    ncclUniqueId id{};
    if (world_.rank() == 0)
      checkNccl(library.ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr, what);
    world_.broadcast(&id, sizeof(id), 0);
    ncclConfig_t config = nonblockingConfig();
    ncclComm_t comm = nullptr;
    ncclResult_t result = library.ncclCommInitRankConfig(
        &comm, world_.size(), id, world_.rank(), &config);
    completeNccl(result, "ncclCommInitRankConfig", comm, deadlineAfter(),
                 timeoutSeconds_,
                 concat(what, ": NCCL initialisation over the world of ",
                        world_.size(),
                        world_.size() == 1 ? " rank" : " ranks"));
    worldComm_ = comm;
  }

  World &world_;
  double timeoutSeconds_;
  /// The parent of every group's communicator; lives as long as the world
  /// (the process), so it is never destroyed.
  ncclComm_t worldComm_ = nullptr;
};

} // namespace

std::unique_ptr<CudaGroups> makeCudaGroups(World &world,
                                           double timeoutSeconds) {
  return std::make_unique<NcclGroups>(world, timeoutSeconds);
}

} // namespace megrt::comm
