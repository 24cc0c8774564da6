// MPI's state in this process, as the plugin keeps it: initialisation,
// finalisation at exit, the lock every MPI call holds, errors, and the
// timed wait for a request.
#ifndef MEGRT_SRC_COMM_MPI_MPIPROCESS_H
#define MEGRT_SRC_COMM_MPI_MPIPROCESS_H

#include <mpi.h>

#include <mutex>
#include <string>

namespace megrt::comm::mpi {

/// Initialises MPI with MPI_THREAD_SERIALIZED unless the application did,
/// once per process, and registers the exit handler: it calls MPI_Finalize
/// (when megrt initialised MPI), or MPI_Abort when an earlier failure left a
/// collective incomplete, since MPI_Finalize would then wait for the
/// stalled ranks forever. Throws megrt::Error.
void initialiseMpi();

/// Held around every MPI call: with MPI_THREAD_SERIALIZED, calls from
/// several threads must not overlap.
std::unique_lock<std::mutex> lockMpi();

/// Whether MPI_Finalize ran (destructors of groups that outlive it skip
/// their MPI calls).
bool mpiFinalized();

// The three functions below expect lockMpi() held.

/// Records that MPI is unusable (a request was abandoned, or MPI reported
/// an error): later calls fail at once and the exit handler aborts.
void markMpiBroken(const std::string &reason);

bool mpiBroken();

/// Throws megrt::Error naming `object` if markMpiBroken was called.
void checkMpiUsable(const std::string &object);

/// Throws "<object>: <call> failed: <MPI_Error_string>" unless `code` is
/// MPI_SUCCESS, and marks MPI broken.
void checkMpi(int code, const char *call, const std::string &object);

/// Tests `request` (taking the lock for each test) until it completes or
/// `timeoutSeconds` pass; then marks MPI broken and throws "<what> did not
/// complete within N s; a peer rank may have died or stalled ...".
void waitForRequest(MPI_Request &request, double timeoutSeconds,
                    const std::string &what);

} // namespace megrt::comm::mpi

#endif // MEGRT_SRC_COMM_MPI_MPIPROCESS_H
