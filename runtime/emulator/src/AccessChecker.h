// Checks every memory access of a library kernel: inside its buffer and
// its view, aligned as the hardware requires, and not racing with another
// thread's access to the same bytes (a write and another access by
// different threads of one block between the same two barriers, or by
// different blocks of one launch); shared memory is also never read before
// the block wrote it.
#ifndef MEGEMU_SRC_ACCESSCHECKER_H
#define MEGEMU_SRC_ACCESSCHECKER_H

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace megemu {

class AccessChecker {
public:
  /// A buffer an access may name: a kernel argument or a workgroup buffer.
  struct Buffer {
    uint8_t *base = nullptr;
    /// Bytes from base the access may touch.
    uint64_t bytes = 0;
    bool shared = false;
    std::string name;
  };

  /// A launch's buffers (the arguments, then the workgroup buffers, whose
  /// bases beginBlock sets); forgets every earlier access.
  void beginLaunch(std::vector<Buffer> buffers);
  /// Block `block` (linear) starts with its workgroup buffers at `bases`:
  /// their shared-memory history starts afresh.
  void beginBlock(uint32_t block, const std::vector<uint8_t *> &bases);

  /// Checks an access of `bytes` at `address` to buffer `buffer`
  /// (megemu/Abi.h's numbering) by thread `thread` in barrier epoch
  /// `epoch` (its warp's shuffles so far: `warpEpoch`) at site `site`;
  /// returns an empty string or what is wrong, with `siteOf` naming the
  /// sites. A shuffle orders its lanes' accesses as __syncwarp does.
  std::string check(uint64_t address, uint64_t bytes, int32_t flags,
                    int32_t buffer, bool inView, uint32_t thread,
                    uint32_t epoch, uint32_t warpEpoch, int32_t site,
                    std::string (*siteOf)(int32_t));

private:
  /// The last write and read of one byte in the launch.
  struct Cell {
    /// 1 + the block of the last write, 0: none yet; the barrier epoch and
    /// the writer's warp's shuffle epoch it was in.
    uint32_t writeBlock = 0, writeEpoch = 0, writeWarpEpoch = 0;
    /// The same of the reads since: readWarpEpoch is the latest of them.
    uint32_t readBlock = 0, readEpoch = 0, readWarpEpoch = 0;
    uint16_t writer = 0, reader = 0;
    /// Several threads read in readBlock's readEpoch (of several warps);
    /// several blocks read.
    bool manyThreads = false, manyWarps = false, manyBlocks = false;
    int32_t writeSite = 0, readSite = 0;
  };
  static constexpr uint64_t kPageBytes = 4096;
  Cell &cell(uint32_t buffer, uint64_t offset);

  std::vector<Buffer> buffers_;
  std::unordered_map<uint64_t, std::unique_ptr<Cell[]>> pages_;
  uint32_t block_ = 0;
};

} // namespace megemu

#endif // MEGEMU_SRC_ACCESSCHECKER_H
