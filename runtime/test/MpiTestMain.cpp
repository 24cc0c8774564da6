// main() of the test programs that every rank runs under mpirun
// (megrt-comm-mpi-tests, megrt-multirank-tests): connects the world before
// the tests and ends with the lines that the program's ctest test looks
// for, since mpirun may exit 0 when some ranks never ran. Only rank 0 prints
// gtest's full output; the others print their failures. Built with
//   MEGRT_MPI_TEST_PROGRAM: the program's name, which starts those lines;
//   MEGRT_MPI_TEST_GATHER 0: every rank prints "rank R of N: K passed,
//     F failed" (RunMpiTest.cmake), with no collective, so that a rank that
//     stalls does not keep the others from reporting;
//   MEGRT_MPI_TEST_GATHER 1: the ranks all-gather their counts and rank 0
//     prints "all N ranks passed K tests", or a line per rank.
#include "comm/Communicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#if !defined(MEGRT_MPI_TEST_PROGRAM) || !defined(MEGRT_MPI_TEST_GATHER)
#error "define MEGRT_MPI_TEST_PROGRAM and MEGRT_MPI_TEST_GATHER"
#endif

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

/// This rank's counts, printed without waiting for the other ranks.
void reportOwnCounts(const megrt::comm::World &world, int passed, int failed) {
  std::printf(MEGRT_MPI_TEST_PROGRAM ": rank %d of %d: %d passed, %d failed\n",
              world.rank(), world.size(), passed, failed);
}

/// Rank 0's report of every rank's counts; true when every rank passed.
bool reportAllRanks(megrt::comm::World &world, int passed, int failed) {
  int counts[2] = {passed, failed};
  std::vector<int> all(2 * static_cast<size_t>(world.size()));
  world.allGatherBytes(counts, all.data(), sizeof counts);
  bool allPassed = true;
  for (int rank = 0; rank < world.size(); ++rank)
    allPassed &= all[2 * rank] > 0 && all[2 * rank + 1] == 0;
  if (world.rank() == 0) {
    if (allPassed)
      std::printf(MEGRT_MPI_TEST_PROGRAM ": all %d ranks passed %d tests\n",
                  world.size(), passed);
    else
      for (int rank = 0; rank < world.size(); ++rank)
        std::printf(MEGRT_MPI_TEST_PROGRAM ": rank %d: %d passed, %d failed\n",
                    rank, all[2 * rank], all[2 * rank + 1]);
  }
  return allPassed;
}

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
  if (MEGRT_MPI_TEST_GATHER) {
    // A failure outside any test (result != 0) counts as one failed test.
    bool allPassed =
        reportAllRanks(world, tests.successful_test_count(),
                       result == 0 ? tests.failed_test_count() : 1);
    result = allPassed ? 0 : 1;
  } else {
    reportOwnCounts(world, tests.successful_test_count(),
                    tests.failed_test_count());
  }
  std::fflush(stdout);
  return result;
}
