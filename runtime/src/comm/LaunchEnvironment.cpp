// What the launcher and the user tell a process through its environment.
#include "comm/LaunchEnvironment.h"

#include "Fail.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace megrt::comm {
namespace {

int parseCount(const char *variable, const char *text) {
  errno = 0;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno || value < 0 || value > INT_MAX)
    fail("the launcher set ", variable, "='", text,
         "', which is not a non-negative integer");
  return static_cast<int>(value);
}

/// The world of the launcher whose variables are SIZE and RANK, if set.
bool readPair(const char *sizeVariable, const char *rankVariable,
              LaunchEnvironment &environment) {
  const char *size = std::getenv(sizeVariable);
  if (!size)
    return false;
  const char *rank = std::getenv(rankVariable);
  if (!rank)
    fail("the launcher set ", sizeVariable, " but not ", rankVariable);
  environment.size = parseCount(sizeVariable, size);
  environment.rank = parseCount(rankVariable, rank);
  environment.source = concat(sizeVariable, "/", rankVariable);
  if (environment.size < 1 || environment.rank >= environment.size)
    fail("the launcher set ", sizeVariable, "=", environment.size, " and ",
         rankVariable, "=", environment.rank,
         ": expected a rank in [0, size) of a world of at least one");
  return true;
}

} // namespace

LaunchEnvironment readLaunchEnvironment() {
  LaunchEnvironment environment;
  if (!readPair("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", environment))
    readPair("PMI_SIZE", "PMI_RANK", environment);
  return environment;
}

double communicationTimeout(double configured) {
  if (const char *text = std::getenv("MEGRT_COMM_TIMEOUT")) {
    char *end = nullptr;
    double seconds = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0)
      fail("MEGRT_COMM_TIMEOUT='", text,
           "' is not a positive number of seconds");
    return seconds;
  }
  if (!std::isfinite(configured) || configured <= 0)
    fail("WorldOptions::timeoutSeconds is ", configured,
         "; expected a positive number of seconds");
  return configured;
}

} // namespace megrt::comm
