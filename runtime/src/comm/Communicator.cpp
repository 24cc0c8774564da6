// connectWorld: the one world of the process, chosen from the launcher's
// environment.
#include "comm/Communicator.h"

#include "comm/LaunchEnvironment.h"
#include "comm/MpiPluginLoader.h"
#include "comm/RuntimeWorld.h"
#include "comm/SingleProcessWorld.h"

#include <mutex>

namespace megrt::comm {
namespace {

std::unique_ptr<World> makeWorld(const WorldOptions &options) {
  LaunchEnvironment environment = readLaunchEnvironment();
  double timeoutSeconds = communicationTimeout(options.timeoutSeconds);
  std::unique_ptr<World> host =
      environment.size == 1 ? std::make_unique<SingleProcessWorld>()
                            : connectMpiWorld(environment, timeoutSeconds);
  return std::make_unique<RuntimeWorld>(std::move(host), timeoutSeconds);
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
