// PeerWatch: a peer process on this host that exits (or lingers as a
// zombie) is reported, with its rank and pid; live peers, peers on other
// hosts and checks sooner than 100 ms apart report nothing.
#include "comm/PeerWatch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace megrt::comm {
namespace {

/// A child that sleeps until killed.
pid_t sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

void afterTheInterval() {
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
}

TEST(PeerWatch, ReportsAPeerThatExited) {
  pid_t live = sleeper(), dying = sleeper();
  ASSERT_GT(live, 0);
  ASSERT_GT(dying, 0);
  PeerAddress self = selfAddress(), one = self, two = self, far = self;
  one.pid = live;
  two.pid = dying;
  std::strcpy(far.host, "another-host");
  far.pid = dying;
  watchPeers({self, one, two, far}, 0);
  afterTheInterval();
  EXPECT_EQ(deadPeer(), std::nullopt);

  ::kill(dying, SIGKILL);
  // Not reaped yet: a zombie counts as exited.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(deadPeer(), std::nullopt) << "checked sooner than 100 ms apart";
  afterTheInterval();
  std::string expected = "rank 2 (pid " + std::to_string(dying) +
                         " on host " + self.host + ") has";
  EXPECT_EQ(deadPeer(), expected);
  ::waitpid(dying, nullptr, 0);
  afterTheInterval();
  EXPECT_EQ(deadPeer(), expected);

  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
  afterTheInterval();
  EXPECT_EQ(deadPeer(), "rank 1 (pid " + std::to_string(live) + " on host " +
                            self.host + "), rank 2 (pid " +
                            std::to_string(dying) + " on host " + self.host +
                            ") have");
  EXPECT_EQ(deadPeerMessage("all_reduce x", "rank 1 (pid 7 on host h) has"),
            "all_reduce x: rank 1 (pid 7 on host h) has exited during this "
            "collective; stopping (the launcher's or that rank's own output "
            "says why it ended)");
  watchPeers({}, -1);
}

} // namespace
} // namespace megrt::comm
