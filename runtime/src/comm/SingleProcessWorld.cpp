// The world of a process started without a launcher: host collectives of a
// group of one are copies.
#include "comm/SingleProcessWorld.h"

#include "Fail.h"
#include "comm/Collective.h"

#include <cstring>

namespace megrt::comm {
namespace {

class SingleProcessGroup : public Group {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  uint64_t start(CollectiveKind kind, const void *src, void *dst, size_t count,
                 DType dtype, ReduceOp op, void *) override {
    checkCollective(kind, dtype, op, count, 1);
    // With one rank every collective is the identity, Avg included.
    if (count && src != dst)
      std::memmove(dst, src, count * elementSize(dtype));
    return pending_.add(kind);
  }

  uint64_t startExchange(const void *send, int sendTo, void *recv, int recvFrom,
                         size_t count, DType dtype, void *) override {
    checkExchange(dtype, count, sendTo, recvFrom, 1);
    // The only peer is this rank: what it sends is what it receives, and a
    // side without the other would wait forever.
    if ((sendTo < 0) != (recvFrom < 0))
      fail(describeExchange(dtype, count, sendTo, recvFrom, 1),
           ": in a group of one rank, a send to itself needs the matching "
           "receive in the same exchange");
    if (count && send != recv)
      std::memmove(recv, send, count * elementSize(dtype));
    return pending_.add(CollectiveKind::AllGather);
  }

  void wait(uint64_t handle) override {
    pending_.take(handle, "the single-process host group");
  }

private:
  /// Nothing is left to do at wait(): the kinds are unused.
  PendingCollectives<CollectiveKind> pending_;
};

} // namespace

std::unique_ptr<Group> SingleProcessWorld::split(int color, int,
                                                 MemorySpace space) {
  if (color < 0)
    fail("split: color ", color,
         " is negative; colors name groups and "
         "must be >= 0");
  if (space != MemorySpace::Host)
    fail("split: the single-process world makes host groups only");
  return std::make_unique<SingleProcessGroup>();
}

void SingleProcessWorld::broadcast(void *, size_t, int root) {
  if (root != 0)
    fail("broadcast from rank ", root,
         " in a single-process world, whose "
         "only rank is 0");
}

void SingleProcessWorld::allGatherBytes(const void *in, void *out,
                                        size_t bytes) {
  if (bytes && in != out)
    std::memmove(out, in, bytes);
}

} // namespace megrt::comm
