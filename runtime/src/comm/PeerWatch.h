// Which ranks of the world have died: each rank's process id and host,
// gathered when the world connects, let a rank waiting in a collective see
// that a peer on its host has exited, and say so at once instead of
// waiting for the timeout (or for the launcher to end the job with its own
// message). Compiled into megrt and into the MPI plugin, each of which
// records the world it connected.
#ifndef MEGRT_SRC_COMM_PEERWATCH_H
#define MEGRT_SRC_COMM_PEERWATCH_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megrt::comm {

class World;

/// A rank's process, as gathered (a fixed size, for allGatherBytes).
struct PeerAddress {
  int64_t pid = 0;
  char host[56] = {};
};
static_assert(sizeof(PeerAddress) == 64);

/// This process's address.
PeerAddress selfAddress();

/// Records the world's addresses (index = rank) for deadPeer().
void watchPeers(std::vector<PeerAddress> peers, int selfRank);

/// Gathers every rank's address over `world` (collective) and records it.
void watchPeers(World &world);

/// The recorded ranks on this host whose processes have exited, as "rank 1
/// (pid 4242 on host node7) has" or "rank 0 (...), rank 1 (...) have" (a
/// message goes on with "exited"); nullopt if none has, if nothing was recorded, or
/// if the last check was less than 100 ms ago (so that waits may call it
/// every iteration). Peers on other hosts cannot be seen from here.
std::optional<std::string> deadPeer();

/// The message of a collective `what` that cannot complete because the
/// peers deadPeer() gave died.
std::string deadPeerMessage(const std::string &what, const std::string &peer);

} // namespace megrt::comm

#endif // MEGRT_SRC_COMM_PEERWATCH_H
