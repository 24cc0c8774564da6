// Runs the threads of one block as fibers with CUDA's synchronisation
// rules: a barrier releases when every thread of the block waits at it, a
// shuffle when every lane of the warp does; a thread that fails, a barrier
// some threads leave the kernel without reaching, and a shuffle whose lanes
// do not all arrive end the block with an error.
#ifndef MEGEMU_SRC_BLOCKRUNNER_H
#define MEGEMU_SRC_BLOCKRUNNER_H

#include "Fibers.h"
#include "megemu/Emulator.h"

#include <functional>
#include <string>
#include <vector>

namespace megemu {

/// How a shuffle's width splits the warp: MLIR's gpu.shuffle (the first
/// `width` lanes take part) or CUDA C++'s __shfl_*_sync (segments of
/// `width` lanes).
enum class ShuffleSemantics { FirstLanes, Segments };

class BlockRunner {
public:
  /// `describeSite` names a barrier's or shuffle's site in messages.
  explicit BlockRunner(std::function<std::string(int32_t)> describeSite);

  /// Runs `body(thread)` on every thread (linear index) of block `block` of
  /// a launch with `config`; returns an empty string, or the error that
  /// ended the block (without the kernel's name).
  std::string run(const LaunchConfig &config, Dim3 block,
                  const std::function<void(unsigned)> &body);

  // From inside the running block's threads.
  static BlockRunner &current();
  unsigned thread() const { return running_; }
  Dim3 threadIndex() const;
  Dim3 blockIndex() const { return block_; }
  const LaunchConfig &config() const { return *config_; }
  /// Barriers the block has passed: accesses in the same epoch are not
  /// ordered by one.
  uint32_t epoch() const { return epoch_; }
  /// Shuffles the calling thread's warp has completed.
  uint32_t warpEpoch() const { return warpEpochs_[running_ / 32]; }
  void barrier(int32_t site);
  uint64_t shuffle(uint64_t bits, int32_t offset, int32_t width,
                   ShuffleMode mode, int32_t site, ShuffleSemantics semantics);
  /// Whether the calling lane's last shuffle read a lane that takes part.
  bool lastShuffleValid() const { return slots_[running_].valid; }
  /// Ends the block with `message` (the thread never resumes).
  [[noreturn]] void fail(std::string message);

private:
  enum class State { Ready, Barrier, Shuffle, Done };
  struct Slot {
    State state = State::Ready;
    int32_t site = 0;
    uint64_t bits = 0;
    int32_t offset = 0, width = 32;
    ShuffleMode mode = kShuffleXor;
    ShuffleSemantics semantics = ShuffleSemantics::FirstLanes;
    bool valid = true;
  };
  static void threadMain(void *self);
  /// Resolves the shuffle warp `warp` waits at; false (with error_ set)
  /// when its lanes disagree.
  bool resolveShuffle(unsigned warp, unsigned lanes);
  std::string threadsText(const std::vector<unsigned> &threads) const;
  std::string stateText(unsigned thread) const;

  std::function<std::string(int32_t)> describeSite_;
  Fibers fibers_;
  std::vector<Slot> slots_;
  const LaunchConfig *config_ = nullptr;
  const std::function<void(unsigned)> *body_ = nullptr;
  Dim3 block_;
  unsigned running_ = 0;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> warpEpochs_;
  std::string error_;
};

} // namespace megemu

#endif // MEGEMU_SRC_BLOCKRUNNER_H
