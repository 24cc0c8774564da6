// Bounds, alignment and race checks of a library kernel's accesses, on a
// shadow of every byte touched in the launch.
#include "AccessChecker.h"

#include "megemu/Abi.h"

#include <algorithm>
#include <sstream>

namespace megemu {

void AccessChecker::beginLaunch(std::vector<Buffer> buffers) {
  buffers_ = std::move(buffers);
  pages_.clear();
}

void AccessChecker::beginBlock(uint32_t block,
                               const std::vector<uint8_t *> &bases) {
  block_ = block + 1;
  size_t next = 0;
  for (uint32_t b = 0; b < buffers_.size(); ++b) {
    if (!buffers_[b].shared)
      continue;
    buffers_[b].base = bases[next++];
    uint64_t pages = (buffers_[b].bytes + kPageBytes - 1) / kPageBytes;
    for (uint64_t p = 0; p < pages; ++p)
      pages_.erase((uint64_t(b) << 40) | p);
  }
}

AccessChecker::Cell &AccessChecker::cell(uint32_t buffer, uint64_t offset) {
  std::unique_ptr<Cell[]> &page =
      pages_[(uint64_t(buffer) << 40) | (offset / kPageBytes)];
  if (!page)
    page.reset(new Cell[kPageBytes]);
  return page[offset % kPageBytes];
}

std::string AccessChecker::check(uint64_t address, uint64_t bytes,
                                 int32_t flags, int32_t buffer, bool inView,
                                 uint32_t thread, uint32_t epoch,
                                 uint32_t warpEpoch, int32_t site,
                                 std::string (*siteOf)(int32_t)) {
  bool write = flags & kWrite;
  const char *what = (flags & kAtomic) ? "atomic update"
                     : write          ? "write"
                                      : "read";
  std::ostringstream error;
  uint64_t align = uint64_t(1) << ((flags >> kAlignShift) & 0xff);
  if (address % align != 0) {
    error << siteOf(site) << ": " << what << " of " << bytes << " bytes at address 0x"
          << std::hex << address << std::dec << " is not aligned to " << align
          << " bytes (the hardware faults on a misaligned access)";
    return error.str();
  }
  if (!inView) {
    error << siteOf(site) << ": " << what
          << " at an index outside the bounds of the view it goes through";
    return error.str();
  }
  if (buffer < 0)
    return "";
  if (static_cast<size_t>(buffer) >= buffers_.size()) {
    error << siteOf(site) << ": access names buffer " << buffer
          << ", which the launch does not have";
    return error.str();
  }
  const Buffer &target = buffers_[buffer];
  auto base = reinterpret_cast<uint64_t>(target.base);
  if (address < base || address - base > target.bytes ||
      target.bytes - (address - base) < bytes) {
    error << siteOf(site) << ": " << what << " of " << bytes
          << " bytes at byte offset "
          << static_cast<int64_t>(address - base) << " of " << target.name
          << " (" << target.bytes << " bytes) is out of bounds";
    return error.str();
  }
  if (flags & kAtomic)
    return "";
  uint64_t offset = address - base;
  for (uint64_t i = 0; i < bytes; ++i) {
    Cell &c = cell(static_cast<uint32_t>(buffer), offset + i);
    // Another thread's access between the same two barriers, or another
    // block's in this launch, is unordered with this one, unless it was a
    // lane of this warp before a shuffle both took part in since.
    auto unordered = [&](uint32_t block, uint32_t ep, uint16_t who,
                         uint32_t warpEp) {
      return block != block_ ||
             (ep == epoch && who != thread &&
              !(who / 32 == thread / 32 && warpEp < warpEpoch));
    };
    auto raceWith = [&](const char *other, uint32_t block, uint16_t who,
                        int32_t otherSite) {
      error << siteOf(site) << ": " << what << " by thread " << thread
            << " races with a " << other << " of the same byte (offset "
            << offset + i << " of " << target.name << ") by ";
      if (block == 0)
        error << "another block (blocks are unordered)";
      else if (block != block_)
        error << "block " << block - 1 << " (blocks are unordered)";
      else if (who == thread)
        error << "another thread with no barrier between";
      else
        error << "thread " << who << " with no barrier between";
      error << ", at " << siteOf(otherSite);
      return error.str();
    };
    if (!write && target.shared && c.writeBlock == 0) {
      error << siteOf(site) << ": thread " << thread << " reads byte "
            << offset + i << " of " << target.name
            << " before any thread of the block wrote it (a barrier missing "
               "after the write, or an index outside what was written)";
      return error.str();
    }
    // One store instruction of a warp writing a location for several of
    // its lanes is defined: one lane's write lands (CUDA's programming
    // guide, "SIMT architecture"); MLIR's block reduction has each lane of
    // its last warp store the total that way.
    bool sameWarpStore = write && c.writeBlock == block_ &&
                         c.writeEpoch == epoch && c.writeSite == site &&
                         c.writer / 32 == thread / 32;
    if (c.writeBlock && !sameWarpStore &&
        unordered(c.writeBlock, c.writeEpoch, c.writer, c.writeWarpEpoch))
      return raceWith("write", c.writeBlock, c.writer, c.writeSite);
    if (write) {
      bool readByOthers =
          c.readBlock &&
          (c.manyBlocks || c.readBlock != block_ ||
           (c.readEpoch == epoch && (c.reader != thread || c.manyThreads) &&
            (c.manyWarps || c.reader / 32 != thread / 32 ||
             c.readWarpEpoch >= warpEpoch)));
      if (readByOthers)
        return raceWith("read", c.manyBlocks ? 0 : c.readBlock, c.reader,
                        c.readSite);
      c.writeBlock = block_;
      c.writeEpoch = epoch;
      c.writeWarpEpoch = warpEpoch;
      c.writer = static_cast<uint16_t>(thread);
      c.writeSite = site;
      continue;
    }
    if (c.readBlock == block_ && c.readEpoch == epoch) {
      c.manyThreads |= c.reader != thread;
      c.manyWarps |= c.reader / 32 != thread / 32;
      c.readWarpEpoch = std::max(c.readWarpEpoch, warpEpoch);
    } else {
      c.manyBlocks |= c.readBlock != 0 && c.readBlock != block_;
      c.readBlock = block_;
      c.readEpoch = epoch;
      c.readWarpEpoch = warpEpoch;
      c.reader = static_cast<uint16_t>(thread);
      c.manyThreads = false;
      c.manyWarps = false;
    }
    c.readSite = site;
  }
  return "";
}

} // namespace megemu
