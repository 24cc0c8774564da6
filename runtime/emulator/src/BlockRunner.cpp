// One block's threads as fibers, with CUDA's barrier and shuffle rules.
#include "BlockRunner.h"

#include <sstream>

namespace megemu {
namespace {

constexpr unsigned kWarp = 32;

/// The block running on this OS thread (blocks of one launch run in turn).
thread_local BlockRunner *running = nullptr;

} // namespace

BlockRunner::BlockRunner(std::function<std::string(int32_t)> describeSite)
    : describeSite_(std::move(describeSite)) {}

BlockRunner &BlockRunner::current() { return *running; }

Dim3 BlockRunner::threadIndex() const {
  const Dim3 &size = config_->block;
  return {running_ % size.x, running_ / size.x % size.y,
          running_ / (size.x * size.y)};
}

void BlockRunner::threadMain(void *self) {
  auto *runner = static_cast<BlockRunner *>(self);
  unsigned thread = runner->running_;
  (*runner->body_)(thread);
  runner->slots_[thread].state = State::Done;
}

std::string BlockRunner::run(const LaunchConfig &config, Dim3 block,
                             const std::function<void(unsigned)> &body) {
  config_ = &config;
  body_ = &body;
  block_ = block;
  epoch_ = 0;
  error_.clear();
  unsigned threads = static_cast<unsigned>(config.block.count());
  slots_.assign(threads, Slot());
  warpEpochs_.assign((threads + kWarp - 1) / kWarp, 0);
  for (unsigned t = 0; t < threads; ++t)
    fibers_.start(t, &BlockRunner::threadMain, this);
  BlockRunner *outer = running;
  running = this;
  struct Restore {
    BlockRunner *outer;
    ~Restore() { running = outer; }
  } restore{outer};

  unsigned warps = (threads + kWarp - 1) / kWarp;
  while (true) {
    for (unsigned t = 0; t < threads; ++t) {
      if (slots_[t].state != State::Ready)
        continue;
      running_ = t;
      fibers_.resume(t);
      if (!error_.empty())
        return error_;
    }
    // Every thread waits or is done: release what can be released.
    bool released = false;
    for (unsigned w = 0; w < warps; ++w) {
      unsigned lanes = std::min(kWarp, threads - w * kWarp);
      unsigned waiting = 0;
      for (unsigned l = 0; l < lanes; ++l)
        waiting += slots_[w * kWarp + l].state == State::Shuffle;
      if (waiting == 0)
        continue;
      if (!resolveShuffle(w, lanes))
        return error_;
      released = true;
    }
    if (released)
      continue;
    std::vector<unsigned> atBarrier, done;
    for (unsigned t = 0; t < threads; ++t)
      (slots_[t].state == State::Barrier ? atBarrier : done).push_back(t);
    if (atBarrier.empty())
      return "";
    if (!done.empty())
      return "threads " + threadsText(atBarrier) + " wait at " +
             describeSite_(slots_[atBarrier.front()].site) +
             ", which threads " + threadsText(done) +
             " never reach (they left the kernel): on a GPU the block "
             "hangs or its barrier counts are undefined";
    for (unsigned t : atBarrier)
      if (slots_[t].site != slots_[atBarrier.front()].site)
        return "thread " + std::to_string(atBarrier.front()) + " waits at " +
               describeSite_(slots_[atBarrier.front()].site) +
               " and thread " + std::to_string(t) + " at " +
               describeSite_(slots_[t].site) +
               ": the threads of a block reach different barriers";
    ++epoch_;
    for (unsigned t : atBarrier)
      slots_[t].state = State::Ready;
  }
}

bool BlockRunner::resolveShuffle(unsigned warp, unsigned lanes) {
  Slot *slot = &slots_[warp * kWarp];
  unsigned first = 0;
  while (slot[first].state != State::Shuffle)
    ++first;
  const Slot &lead = slot[first];
  // The lanes that take part: all of the warp, or with MLIR's semantics the
  // first `width` lanes.
  unsigned parties = lanes;
  if (lead.semantics == ShuffleSemantics::FirstLanes)
    parties = std::min<unsigned>(lanes, static_cast<unsigned>(lead.width));
  std::ostringstream error;
  unsigned base = warp * kWarp;
  for (unsigned l = 0; l < lanes; ++l) {
    const Slot &s = slot[l];
    bool takesPart = l < parties;
    if (takesPart && s.state != State::Shuffle) {
      error << "lane " << l << " of warp " << warp << " (thread " << base + l
            << ") " << stateText(base + l) << " while lane " << first
            << " waits at " << describeSite_(lead.site)
            << ": every lane of a warp must reach its shuffles together";
    } else if (!takesPart && s.state == State::Shuffle) {
      error << "lane " << l << " of warp " << warp << " reaches "
            << describeSite_(s.site) << ", whose width " << lead.width
            << " leaves it out (its mask does not hold the lane)";
    } else if (takesPart && (s.site != lead.site || s.width != lead.width ||
                             s.mode != lead.mode)) {
      error << "lanes " << first << " and " << l << " of warp " << warp
            << " shuffle at " << describeSite_(lead.site) << " and "
            << describeSite_(s.site)
            << " (or with different widths or modes) at once";
    } else {
      continue;
    }
    error_ = error.str();
    return false;
  }
  std::vector<uint64_t> results(parties);
  for (unsigned l = 0; l < parties; ++l) {
    const Slot &s = slot[l];
    unsigned width = static_cast<unsigned>(s.width);
    unsigned start =
        s.semantics == ShuffleSemantics::Segments ? l / width * width : 0;
    unsigned end = std::min(parties, start + width);
    int64_t source = 0;
    switch (s.mode) {
    case kShuffleXor:
      source = static_cast<int64_t>(l ^ static_cast<unsigned>(s.offset));
      break;
    case kShuffleUp:
      source = static_cast<int64_t>(l) - s.offset;
      break;
    case kShuffleDown:
      source = static_cast<int64_t>(l) + s.offset;
      break;
    case kShuffleIdx:
      source = static_cast<int64_t>(start) + s.offset;
      break;
    }
    bool valid = source >= static_cast<int64_t>(start) &&
                 source < static_cast<int64_t>(end);
    results[l] = valid ? slot[source].bits : s.bits;
    slot[l].valid = valid;
  }
  for (unsigned l = 0; l < parties; ++l) {
    slot[l].bits = results[l];
    slot[l].state = State::Ready;
  }
  ++warpEpochs_[warp];
  return true;
}

void BlockRunner::barrier(int32_t site) {
  Slot &slot = slots_[running_];
  slot.state = State::Barrier;
  slot.site = site;
  fibers_.yield();
}

uint64_t BlockRunner::shuffle(uint64_t bits, int32_t offset, int32_t width,
                              ShuffleMode mode, int32_t site,
                              ShuffleSemantics semantics) {
  if (width < 1 || width > static_cast<int32_t>(kWarp) ||
      (width & (width - 1)) != 0 || offset < 0)
    fail("shuffle at " + describeSite_(site) + " with width " +
         std::to_string(width) + " and offset " + std::to_string(offset) +
         ": the width must be a power of two up to 32 and the offset "
         "non-negative");
  Slot &slot = slots_[running_];
  slot.state = State::Shuffle;
  slot.site = site;
  slot.bits = bits;
  slot.offset = offset;
  slot.width = width;
  slot.mode = mode;
  slot.semantics = semantics;
  fibers_.yield();
  return slots_[running_].bits;
}

void BlockRunner::fail(std::string message) {
  error_ = std::move(message);
  if (error_.empty())
    error_ = "failed";
  // Never resumed: the scheduler returns the error.
  fibers_.yield();
  __builtin_unreachable();
}

std::string BlockRunner::threadsText(const std::vector<unsigned> &threads) const {
  // Runs of consecutive threads, at most a few.
  std::ostringstream os;
  size_t runs = 0;
  for (size_t i = 0; i < threads.size();) {
    size_t j = i;
    while (j + 1 < threads.size() && threads[j + 1] == threads[j] + 1)
      ++j;
    if (runs++ == 4) {
      os << ", ...";
      break;
    }
    os << (i ? ", " : "") << threads[i];
    if (j > i)
      os << "-" << threads[j];
    i = j + 1;
  }
  return os.str();
}

std::string BlockRunner::stateText(unsigned thread) const {
  const Slot &slot = slots_[thread];
  switch (slot.state) {
  case State::Done:
    return "left the kernel";
  case State::Barrier:
    return "waits at " + describeSite_(slot.site);
  case State::Shuffle:
    return "waits at " + describeSite_(slot.site);
  case State::Ready:
    break;
  }
  return "runs";
}

} // namespace megemu
