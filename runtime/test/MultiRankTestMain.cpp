// main() of megrt-multirank-tests, run by every rank under mpirun: rank 0
// prints gtest's output and, after every rank finished, one summary line
// that ctest looks for ("all N ranks passed"), since mpirun may exit 0 when
// ranks never ran. The other ranks print only their failures.
#include "comm/Communicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

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
  int counts[2] = {tests.successful_test_count(),
                   result == 0 ? tests.failed_test_count() : 1};
  std::vector<int> all(2 * static_cast<size_t>(world.size()));
  world.allGatherBytes(counts, all.data(), sizeof counts);
  bool passed = true;
  for (int rank = 0; rank < world.size(); ++rank)
    passed &= all[2 * rank] > 0 && all[2 * rank + 1] == 0;
  if (world.rank() == 0) {
    if (passed)
      std::printf("megrt-multirank-tests: all %d ranks passed %d tests\n",
                  world.size(), counts[0]);
    else
      for (int rank = 0; rank < world.size(); ++rank)
        std::printf("megrt-multirank-tests: rank %d: %d passed, %d failed\n",
                    rank, all[2 * rank], all[2 * rank + 1]);
  }
  std::fflush(stdout);
  return passed ? 0 : 1;
}
