// The launcher's and the user's environment variables as the communicators
// read them.
#include "comm/LaunchEnvironment.h"

#include "ScopedEnvironment.h"
#include "megrt/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::comm {
namespace {

using test::ScopedEnvironment;
using ::testing::HasSubstr;

std::string errorOf(void (*body)()) {
  try {
    body();
  } catch (const Error &error) {
    return error.what();
  }
  return "no error";
}

TEST(LaunchEnvironmentTest, WithoutLauncherIsOneProcess) {
  ScopedEnvironment env;
  env.clearLauncher();
  LaunchEnvironment launch = readLaunchEnvironment();
  EXPECT_EQ(launch.size, 1);
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.source, "");
}

TEST(LaunchEnvironmentTest, ReadsOpenMpiBeforePmi) {
  ScopedEnvironment env;
  env.clearLauncher();
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("PMI_SIZE", "8");
  env.set("PMI_RANK", "5");
  LaunchEnvironment launch = readLaunchEnvironment();
  EXPECT_EQ(launch.size, 4);
  EXPECT_EQ(launch.rank, 3);
  EXPECT_EQ(launch.source, "OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK");
}

TEST(LaunchEnvironmentTest, ReadsPmi) {
  ScopedEnvironment env;
  env.clearLauncher();
  env.set("PMI_SIZE", "2");
  env.set("PMI_RANK", "1");
  LaunchEnvironment launch = readLaunchEnvironment();
  EXPECT_EQ(launch.size, 2);
  EXPECT_EQ(launch.rank, 1);
  EXPECT_EQ(launch.source, "PMI_SIZE/PMI_RANK");
}

TEST(LaunchEnvironmentTest, RejectsBadValues) {
  ScopedEnvironment env;
  env.clearLauncher();
  env.set("OMPI_COMM_WORLD_SIZE", "four");
  env.set("OMPI_COMM_WORLD_RANK", "0");
  EXPECT_THAT(errorOf([] { readLaunchEnvironment(); }),
              HasSubstr("OMPI_COMM_WORLD_SIZE='four', which is not a "
                        "non-negative integer"));
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  env.set("OMPI_COMM_WORLD_RANK", "2");
  EXPECT_THAT(errorOf([] { readLaunchEnvironment(); }),
              HasSubstr("expected a rank in [0, size)"));
  env.unset("OMPI_COMM_WORLD_RANK");
  EXPECT_THAT(errorOf([] { readLaunchEnvironment(); }),
              HasSubstr("set OMPI_COMM_WORLD_SIZE but not "
                        "OMPI_COMM_WORLD_RANK"));
}

TEST(LaunchEnvironmentTest, TimeoutFromOptionsOrEnvironment) {
  ScopedEnvironment env;
  env.clearLauncher();
  EXPECT_EQ(communicationTimeout(300), 300);
  env.set("MEGRT_COMM_TIMEOUT", "2.5");
  EXPECT_EQ(communicationTimeout(300), 2.5);
  env.set("MEGRT_COMM_TIMEOUT", "soon");
  EXPECT_THAT(errorOf([] { communicationTimeout(300); }),
              HasSubstr("MEGRT_COMM_TIMEOUT='soon' is not a positive number "
                        "of seconds"));
  env.unset("MEGRT_COMM_TIMEOUT");
  EXPECT_THAT(errorOf([] { communicationTimeout(0); }),
              HasSubstr("WorldOptions::timeoutSeconds is 0"));
}

} // namespace
} // namespace megrt::comm
