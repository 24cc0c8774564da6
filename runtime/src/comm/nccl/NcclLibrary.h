// NCCL, loaded with dlopen like the CUDA driver: megrt never links it, so
// that a build with CUDA runs where NCCL is absent until a CUDA group is
// asked for.
#ifndef MEGRT_SRC_COMM_NCCL_NCCLLIBRARY_H
#define MEGRT_SRC_COMM_NCCL_NCCLLIBRARY_H

#include <nccl.h>

#include <chrono>
#include <functional>
#include <string>

namespace megrt::comm {

/// Pointers to the functions of Nccl.def, typed with their prototypes.
struct NcclLibrary {
#define MEGRT_NCCL_FUNCTION(name) decltype(&::name) name = nullptr;
#include "comm/nccl/Nccl.def"
#undef MEGRT_NCCL_FUNCTION
  /// As ncclGetVersion reports it: 10000 * major + 100 * minor + patch.
  int version = 0;
};

/// Loads libnccl.so.2 on first use (thread-safe, once per process): from
/// the loader's search path, then $CUDA_HOME/lib64 and lib,
/// /usr/local/cuda/lib64 and lib. Throws megrt::Error if it is missing, of
/// another major version, or older than 2.18 (ncclCommSplit).
const NcclLibrary &nccl();

/// "ncclX (description; NCCL's last error)" for a result on `comm`.
std::string ncclErrorText(ncclResult_t result, ncclComm_t comm);

/// Throws "<object>: <call> failed: ..." unless `result` is ncclSuccess or
/// ncclInProgress (a nonblocking communicator's call still running, see
/// waitForNccl).
void checkNccl(ncclResult_t result, const char *call, ncclComm_t comm,
               const std::string &object);

/// Polls ncclCommGetAsyncError until the nonblocking calls on `comm` are
/// done and `done()` holds. On an error, or at `deadline`, aborts `comm`
/// (the caller must not use or destroy it afterwards) and throws naming
/// `what`; a timeout says a peer may have died or stalled.
void waitForNccl(
    ncclComm_t comm, std::chrono::steady_clock::time_point deadline,
    double timeoutSeconds, const std::string &what,
    const std::function<bool()> &done = [] { return true; });

/// A nonblocking call's whole outcome: its `result`, then waitForNccl. On
/// any failure `comm` is aborted before the throw.
void completeNccl(ncclResult_t result, const char *call, ncclComm_t comm,
                  std::chrono::steady_clock::time_point deadline,
                  double timeoutSeconds, const std::string &what);

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_NCCL_NCCLLIBRARY_H
