// The interface between megrt and its MPI plugin, libmegrt_mpi.so: megrt
// does not link MPI, and loads the plugin only for a world of more than one
// rank. The plugin's classes implement World and Group of Communicator.h;
// both sides are built from the same sources, and the factory's name
// carries the version of this interface so that a stale plugin is refused.
#ifndef MEGRT_SRC_COMM_MPIPLUGIN_H
#define MEGRT_SRC_COMM_MPIPLUGIN_H

#include "comm/Communicator.h"

#include <cstddef>

namespace megrt::comm {

struct MpiPluginArgs {
  /// The world as the launcher's environment describes it; the plugin checks
  /// that MPI agrees.
  int expectedSize = 0;
  int expectedRank = 0;
  /// Limit on every collective, split and broadcast.
  double timeoutSeconds = 0;
};

} // namespace megrt::comm

/// The factory's name; bump the suffix whenever MpiPluginArgs, World or
/// Group change.
#define MEGRT_MPI_CONNECT_FUNCTION megrt_mpi_connect_v1
#define MEGRT_MPI_STRINGIFY_(name) #name
#define MEGRT_MPI_STRINGIFY(name) MEGRT_MPI_STRINGIFY_(name)
#define MEGRT_MPI_CONNECT_SYMBOL MEGRT_MPI_STRINGIFY(MEGRT_MPI_CONNECT_FUNCTION)

extern "C" {
/// Initialises MPI (once per process) and returns the world, owned by the
/// caller; on failure returns null with a message in `error` (no exception
/// crosses the C boundary).
using MegrtMpiConnect =
    megrt::comm::World *(*)(const megrt::comm::MpiPluginArgs *args, char *error,
                            size_t errorBytes);
}

#endif // MEGRT_SRC_COMM_MPIPLUGIN_H
