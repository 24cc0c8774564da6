// Finds and loads the MPI plugin (libmegrt_mpi.so) for a multi-rank world.
#include "comm/MpiPluginLoader.h"

#include "DynamicLibrary.h"
#include "Fail.h"
#include "comm/MpiPlugin.h"

#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace megrt::comm {
namespace {

/// An explicit MEGRT_MPI_PLUGIN is the only candidate: falling back to
/// another build's plugin would hide the mistake.
std::vector<std::string> candidatePaths() {
  if (const char *path = std::getenv("MEGRT_MPI_PLUGIN"); path && *path)
    return {path};
  std::vector<std::string> paths;
#ifdef MEGRT_MPI_PLUGIN_BUILD_PATH
  paths.push_back(MEGRT_MPI_PLUGIN_BUILD_PATH);
#endif
#ifdef MEGRT_MPI_PLUGIN_INSTALL_PATH
  paths.push_back(MEGRT_MPI_PLUGIN_INSTALL_PATH);
#endif
  return paths;
}

} // namespace

std::unique_ptr<World> connectMpiWorld(const LaunchEnvironment &environment,
                                       double timeoutSeconds) {
  // RTLD_GLOBAL: Open MPI's components, which it dlopens itself, resolve
  // libmpi's symbols from the global scope.
  OpenedLibrary plugin =
      openFirstLibrary(candidatePaths(), RTLD_NOW | RTLD_GLOBAL);
  // The plugin stays loaded for the life of the process: MPI is finalised
  // at exit by a handler in it.
  void *library = plugin.handle.release();
  std::string world =
      concat("the launcher started a world of ", environment.size, " ranks (",
             environment.source, "), which needs megrt's MPI plugin");
  if (!library) {
    if (plugin.reasons.empty())
      fail(world, ", but this megrt was built without it (CMake found no "
                  "MPI: install an MPI development package such as "
                  "libopenmpi-dev and rebuild), and MEGRT_MPI_PLUGIN is not "
                  "set");
    fail(world, ", which could not be loaded (", plugin.reasons,
         "); set MEGRT_MPI_PLUGIN to the path of libmegrt_mpi.so (built next "
         "to megrt when CMake finds MPI, installed in its libdir), or run one "
         "process without a launcher");
  }

  auto connect = reinterpret_cast<MegrtMpiConnect>(
      dlsym(library, MEGRT_MPI_CONNECT_SYMBOL));
  if (!connect)
    fail(world, ", but '", plugin.path, "' has no ", MEGRT_MPI_CONNECT_SYMBOL,
         ": it was built from another version of megrt");
  MpiPluginArgs args;
  args.expectedSize = environment.size;
  args.expectedRank = environment.rank;
  args.timeoutSeconds = timeoutSeconds;
  char error[4096] = "";
  std::unique_ptr<World> mpiWorld(connect(&args, error, sizeof(error)));
  if (!mpiWorld)
    fail("rank ", environment.rank, " of ", environment.size,
         ": connecting to MPI through '", plugin.path, "' failed: ", error);
  return mpiWorld;
}

} // namespace megrt::comm
