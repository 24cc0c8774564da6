// What the launcher (mpirun, a PMI launcher) and the user tell a process
// through its environment: the world's size and this process's rank, and
// the communication timeout.
#ifndef MEGRT_SRC_COMM_LAUNCHENVIRONMENT_H
#define MEGRT_SRC_COMM_LAUNCHENVIRONMENT_H

#include <string>

namespace megrt::comm {

struct LaunchEnvironment {
  int size = 1;
  int rank = 0;
  /// The variables the values came from ("OMPI_COMM_WORLD_SIZE/RANK"), or
  /// empty without a launcher.
  std::string source;
};

/// Reads OMPI_COMM_WORLD_SIZE/RANK (Open MPI), else PMI_SIZE/PMI_RANK
/// (MPICH's Hydra, Slurm's PMI). Throws megrt::Error for a value that is not
/// a number, or a rank outside the world.
LaunchEnvironment readLaunchEnvironment();

/// MEGRT_COMM_TIMEOUT (seconds) when set, else `configured`. Throws
/// megrt::Error when either is not a positive number.
double communicationTimeout(double configured);

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_LAUNCHENVIRONMENT_H
