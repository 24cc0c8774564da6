// main() of the tests run under mpirun: connects the world before the tests
// and ends with one line per rank that the ctest driver (RunMpiTest.cmake)
// looks for, since mpirun may exit 0 when some ranks never ran. Only rank 0
// prints gtest's full output; the others print their failures.
#include "comm/Communicator.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (result.failed())
      std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_,
                  result.file_name() ? result.file_name() : "?",
                  result.line_number(), result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo &info) override {
    if (info.result()->Failed())
      std::printf("[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(),
                  info.name());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  megrt::comm::World &world = megrt::comm::connectWorld();
  if (world.rank() != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(world.rank()));
  }
  int result = RUN_ALL_TESTS();
  const ::testing::UnitTest &tests = *::testing::UnitTest::GetInstance();
  std::printf("megrt-comm-mpi-tests: rank %d of %d: %d passed, %d failed\n",
              world.rank(), world.size(), tests.successful_test_count(),
              tests.failed_test_count());
  std::fflush(stdout);
  return result;
}
