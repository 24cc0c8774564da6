// connectWorld: the one world of the process, chosen from the launcher's
// environment.
#include "comm/Communicator.h"

#include "Fail.h"
#include "comm/LaunchEnvironment.h"
#include "comm/SingleProcessWorld.h"

#include <mutex>

namespace megrt::comm {
namespace {

std::unique_ptr<World> makeWorld(const WorldOptions &options) {
  LaunchEnvironment environment = readLaunchEnvironment();
  communicationTimeout(options.timeoutSeconds);
  if (environment.size == 1)
    return std::make_unique<SingleProcessWorld>();
  fail("the launcher started a world of ", environment.size, " ranks (",
       environment.source,
       "), but multi-process worlds are not supported "
       "yet by this build of megrt");
}

} // namespace

World &connectWorld(const WorldOptions &options) {
  static std::mutex mutex;
  // Never destroyed: groups may outlive any static object, and MPI is
  // finalised at exit by the plugin itself.
  static World *world = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!world)
    world = makeWorld(options).release();
  return *world;
}

} // namespace megrt::comm
