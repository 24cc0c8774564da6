// The hooks a library kernel calls (megemu/Abi.h), and the host API that
// host builds of CUDA code call, on the launch running on this OS thread.
#include "LaunchContext.h"

namespace megemu {
namespace {

BlockRunner &runner() { return BlockRunner::current(); }

std::string siteOf(int32_t site) {
  const KernelLibrary *library = LaunchContext::current()->library;
  return library ? library->site(site) : "site " + std::to_string(site);
}

int64_t hookId(int32_t which) {
  BlockRunner &r = runner();
  const LaunchConfig &config = r.config();
  auto pick = [&](Dim3 d, int32_t axis) -> int64_t {
    return axis == 0 ? d.x : axis == 1 ? d.y : d.z;
  };
  if (which == kLaneId)
    return r.thread() % 32;
  if (which < 0 || which > kLaneId)
    r.fail("thread " + std::to_string(r.thread()) + ": megemu_id(" +
           std::to_string(which) + ") asks for no known id");
  int32_t axis = which % 3;
  switch (which - axis) {
  case kThreadId:
    return pick(r.threadIndex(), axis);
  case kBlockId:
    return pick(r.blockIndex(), axis);
  case kBlockDim:
    return pick(config.block, axis);
  default:
    return pick(config.grid, axis);
  }
}

void hookBarrier(int32_t site) { runner().barrier(site); }

int64_t hookShuffle(int64_t bits, int32_t offset, int32_t width, int32_t mode,
                    int32_t site) {
  BlockRunner &r = runner();
  if (mode < kShuffleXor || mode > kShuffleIdx)
    r.fail("thread " + std::to_string(r.thread()) + ": shuffle at " +
           siteOf(site) + " has unknown mode " + std::to_string(mode));
  return static_cast<int64_t>(r.shuffle(static_cast<uint64_t>(bits), offset,
                                        width, static_cast<ShuffleMode>(mode),
                                        site, ShuffleSemantics::FirstLanes));
}

int32_t hookShuffleValid() { return runner().lastShuffleValid() ? 1 : 0; }

void hookAccess(int64_t address, int64_t bytes, int32_t flags, int32_t buffer,
                int32_t site, int32_t inView) {
  BlockRunner &r = runner();
  std::string error = LaunchContext::current()->checker.check(
      static_cast<uint64_t>(address), static_cast<uint64_t>(bytes), flags,
      buffer, inView != 0, r.thread(), r.epoch(), r.warpEpoch(), site,
      &siteOf);
  if (!error.empty())
    r.fail("thread " + std::to_string(r.thread()) + ": " + error);
}

} // namespace

LaunchContext *&LaunchContext::current() {
  static thread_local LaunchContext *context = nullptr;
  return context;
}

void *hookAddress(Hook hook) {
  switch (hook) {
  case kHookId:
    return reinterpret_cast<void *>(&hookId);
  case kHookBarrier:
    return reinterpret_cast<void *>(&hookBarrier);
  case kHookShuffle:
    return reinterpret_cast<void *>(&hookShuffle);
  case kHookShuffleValid:
    return reinterpret_cast<void *>(&hookShuffleValid);
  case kHookAccess:
    return reinterpret_cast<void *>(&hookAccess);
  case kHookCount:
    break;
  }
  return nullptr;
}

Dim3 threadIdx() { return runner().threadIndex(); }
Dim3 blockIdx() { return runner().blockIndex(); }
Dim3 blockDim() { return runner().config().block; }
Dim3 gridDim() { return runner().config().grid; }
void syncThreads() { runner().barrier(0); }

uint32_t shuffle(uint32_t bits, int32_t offset, int32_t width,
                 ShuffleMode mode) {
  return static_cast<uint32_t>(
      runner().shuffle(bits, offset, width, mode, 0, ShuffleSemantics::Segments));
}

void *dynamicShared() { return LaunchContext::current()->dynamicShared; }

} // namespace megemu
