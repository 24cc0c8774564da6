// The one symbol the MPI plugin exports: megrt's factory of MPI worlds.
#include "Fail.h"
#include "comm/MpiPlugin.h"
#include "comm/mpi/MpiProcess.h"
#include "comm/mpi/MpiWorld.h"

#include <cstdio>
#include <type_traits>

extern "C" __attribute__((visibility("default"))) megrt::comm::World *
MEGRT_MPI_CONNECT_FUNCTION(const megrt::comm::MpiPluginArgs *args, char *error,
                           size_t errorBytes) {
  using namespace megrt::comm;
  try {
    mpi::initialiseMpi();
    auto world = std::make_unique<mpi::MpiWorld>(args->timeoutSeconds);
    if (world->size() != args->expectedSize ||
        world->rank() != args->expectedRank)
      megrt::fail("MPI reports rank ", world->rank(), " of ", world->size(),
                  ", but the launcher's environment says rank ",
                  args->expectedRank, " of ", args->expectedSize,
                  "; was the process started by another MPI's launcher?");
    return world.release();
  } catch (const std::exception &exception) {
    std::snprintf(error, errorBytes, "%s", exception.what());
    return nullptr;
  }
}

static_assert(
    std::is_same_v<decltype(&MEGRT_MPI_CONNECT_FUNCTION), MegrtMpiConnect>,
    "the factory's prototype must match MpiPlugin.h");
