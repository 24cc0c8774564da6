// MPI's world as the plugin presents it: a private duplicate of
// MPI_COMM_WORLD, split into host groups.
#include "comm/mpi/MpiWorld.h"

#include "Fail.h"
#include "comm/mpi/MpiGroup.h"
#include "comm/PeerWatch.h"
#include "comm/mpi/MpiProcess.h"

#include <climits>

namespace megrt::comm::mpi {
namespace {

/// "Open MPI v4.1.4" from "Open MPI v4.1.4, package: ...".
std::string libraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS)
    return "unknown version";
  std::string version(text, length);
  return version.substr(0, version.find_first_of(",\n"));
}

void checkIntBytes(size_t bytes, const std::string &what) {
  if (bytes > static_cast<size_t>(INT_MAX))
    fail(what, ": ", bytes, " bytes is more than MPI's int count allows");
}

} // namespace

MpiWorld::MpiWorld(double timeoutSeconds) : timeoutSeconds_(timeoutSeconds) {
  std::unique_lock<std::mutex> lock = lockMpi();
  std::string object = "MPI's world";
  checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup", object);
  checkMpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN),
           "MPI_Comm_set_errhandler", object);
  checkMpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", object);
  checkMpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", object);
  MPI_Comm host = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_,
                               MPI_INFO_NULL, &host),
           "MPI_Comm_split_type", object);
  checkMpi(MPI_Comm_rank(host, &localRank_), "MPI_Comm_rank", object);
  MPI_Comm_free(&host);
  description_ = concat("MPI (", libraryVersion(), ")");
  lock.unlock();
  watchPeers(*this);
}

MpiWorld::~MpiWorld() {
  std::unique_lock<std::mutex> lock = lockMpi();
  if (!mpiBroken() && !mpiFinalized())
    MPI_Comm_free(&comm_);
}

template <typename Start>
void MpiWorld::runTimed(const char *what, Start start) {
  std::string object =
      concat("rank ", rank_, ": ", what, " on the world of ", size_, " ranks");
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::unique_lock<std::mutex> lock = lockMpi();
    checkMpiUsable(object);
    checkMpi(start(&request), what, object);
  }
  waitForRequest(request, timeoutSeconds_, object);
}

std::unique_ptr<Group> MpiWorld::split(int color, int key, MemorySpace space) {
  if (space != MemorySpace::Host)
    fail("rank ", rank_,
         ": split: the MPI plugin makes host groups; CUDA "
         "groups are megrt's, over NCCL");
  if (color < 0)
    fail("rank ", rank_, ": split: color ", color,
         " is negative; colors name groups and must be >= 0");
  runTimed("split (MPI_Ibarrier)",
           [&](MPI_Request *request) { return MPI_Ibarrier(comm_, request); });
  std::unique_lock<std::mutex> lock = lockMpi();
  MPI_Comm group = MPI_COMM_NULL;
  checkMpi(
      MPI_Comm_split(comm_, color, key, &group), "MPI_Comm_split",
      concat("rank ", rank_, ": split (color ", color, ", key ", key, ")"));
  lock.unlock();
  return std::make_unique<MpiGroup>(group, rank_, color, timeoutSeconds_);
}

void MpiWorld::broadcast(void *data, size_t bytes, int root) {
  if (root < 0 || root >= size_)
    fail("rank ", rank_, ": broadcast from rank ", root,
         ", which is not in the world of ", size_, " ranks");
  checkIntBytes(bytes, "broadcast");
  runTimed("broadcast", [&](MPI_Request *request) {
    return MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_,
                      request);
  });
}

void MpiWorld::allGatherBytes(const void *in, void *out, size_t bytes) {
  checkIntBytes(bytes, "allGatherBytes");
  const void *ownPart = static_cast<const char *>(out) + rank_ * bytes;
  runTimed("allGatherBytes", [&](MPI_Request *request) {
    int n = static_cast<int>(bytes);
    return MPI_Iallgather(in == ownPart ? MPI_IN_PLACE : in, n, MPI_BYTE, out,
                          n, MPI_BYTE, comm_, request);
  });
}

void MpiWorld::barrier() {
  runTimed("barrier",
           [&](MPI_Request *request) { return MPI_Ibarrier(comm_, request); });
}

} // namespace megrt::comm::mpi
