// Which ranks of the world have died (see PeerWatch.h).
#include "comm/PeerWatch.h"

#include "Fail.h"
#include "comm/Communicator.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <string>
#include <unistd.h>

namespace megrt::comm {
namespace {

struct Watch {
  std::mutex mutex;
  std::vector<PeerAddress> peers;
  int self = -1;
  std::chrono::steady_clock::time_point lastCheck;
};

Watch &watch() {
  // Never destroyed: waits at exit may still ask.
  static Watch *state = new Watch;
  return *state;
}

/// Whether process `pid` of this host has exited: gone, or a zombie that
/// its parent has not reaped yet.
bool exited(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0)
    return errno == ESRCH;
  // Read with the system calls: the process may vanish between the two
  // checks, and a read of its stat file then fails with ESRCH (which
  // std::ifstream reports by throwing).
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ESRCH;
  std::string text;
  char buffer[512];
  ssize_t got;
  while ((got = ::read(fd, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(got));
  int readError = got < 0 ? errno : 0;
  ::close(fd);
  if (readError)
    return readError == ESRCH || readError == ENOENT;
  // "pid (comm) S ...": the state follows the last ')'.
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size())
    return false;
  char state = text[close + 2];
  return state == 'Z' || state == 'X';
}

} // namespace

PeerAddress selfAddress() {
  PeerAddress address;
  address.pid = static_cast<int64_t>(::getpid());
  if (::gethostname(address.host, sizeof address.host - 1) != 0)
    std::strcpy(address.host, "?");
  address.host[sizeof address.host - 1] = '\0';
  return address;
}

void watchPeers(std::vector<PeerAddress> peers, int selfRank) {
  Watch &state = watch();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.peers = std::move(peers);
  state.self = selfRank;
  state.lastCheck = std::chrono::steady_clock::now();
}

void watchPeers(World &world) {
  PeerAddress mine = selfAddress();
  std::vector<PeerAddress> all(static_cast<size_t>(world.size()));
  world.allGatherBytes(&mine, all.data(), sizeof mine);
  watchPeers(std::move(all), world.rank());
}

std::optional<std::string> deadPeer() {
  Watch &state = watch();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.self < 0)
    return std::nullopt;
  auto now = std::chrono::steady_clock::now();
  if (now - state.lastCheck < std::chrono::milliseconds(100))
    return std::nullopt;
  state.lastCheck = now;
  const PeerAddress &self = state.peers[static_cast<size_t>(state.self)];
  std::string dead;
  int count = 0;
  for (size_t rank = 0; rank < state.peers.size(); ++rank) {
    const PeerAddress &peer = state.peers[rank];
    if (static_cast<int>(rank) == state.self ||
        std::strcmp(peer.host, self.host) != 0 || !exited(peer.pid))
      continue;
    dead += concat(count++ ? ", " : "", "rank ", rank, " (pid ", peer.pid,
                   " on host ", peer.host, ")");
  }
  if (!count)
    return std::nullopt;
  return dead + (count == 1 ? " has" : " have");
}

std::string deadPeerMessage(const std::string &what, const std::string &peer) {
  return concat(what, ": ", peer,
                " exited during this collective; stopping (the launcher's "
                "or that rank's own output says why it ended)");
}

} // namespace megrt::comm
