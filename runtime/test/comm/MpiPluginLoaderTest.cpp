// How megrt reports a multi-rank world whose MPI plugin cannot be used; the
// plugin itself is tested under mpirun (MpiWorldTest.cpp).
#include "comm/MpiPluginLoader.h"

#include "ScopedEnvironment.h"
#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::comm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string connectError() {
  LaunchEnvironment environment;
  environment.size = 4;
  environment.rank = 1;
  environment.source = "OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK";
  try {
    connectMpiWorld(environment, 5);
  } catch (const Error &error) {
    return error.what();
  }
  return "no error";
}

TEST(MpiPluginLoaderTest, MissingPluginSaysHowToFix) {
  test::ScopedEnvironment env;
  env.set("MEGRT_MPI_PLUGIN", "/nonexistent/libmegrt_mpi.so");
  EXPECT_THAT(
      connectError(),
      AllOf(HasSubstr("the launcher started a world of 4 ranks "
                      "(OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK), which "
                      "needs megrt's MPI plugin, which could not be loaded "
                      "(/nonexistent/libmegrt_mpi.so: cannot open shared "
                      "object file"),
            HasSubstr("set MEGRT_MPI_PLUGIN to the path of libmegrt_mpi.so")));
}

TEST(MpiPluginLoaderTest, ForeignLibraryIsRefused) {
  test::ScopedEnvironment env;
  env.set("MEGRT_MPI_PLUGIN", "libm.so.6");
  EXPECT_THAT(connectError(),
              HasSubstr("'libm.so.6' has no megrt_mpi_connect_v1: it was "
                        "built from another version of megrt"));
}

} // namespace
} // namespace megrt::comm
