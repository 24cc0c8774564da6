// Finds and loads the MPI plugin (libmegrt_mpi.so) for a multi-rank world.
#ifndef MEGRT_SRC_COMM_MPIPLUGINLOADER_H
#define MEGRT_SRC_COMM_MPIPLUGINLOADER_H

#include "comm/Communicator.h"
#include "comm/LaunchEnvironment.h"

#include <memory>

namespace megrt::comm {

/// Loads the plugin from $MEGRT_MPI_PLUGIN when set (and only from there),
/// else from the build tree, else from the install's libdir, and connects
/// to MPI's world through it. Throws megrt::Error naming the world's size,
/// every path tried with dlerror's reason, and how to fix it.
std::unique_ptr<World> connectMpiWorld(const LaunchEnvironment &environment,
                                       double timeoutSeconds);

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_MPIPLUGINLOADER_H
