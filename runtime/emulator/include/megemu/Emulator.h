// The GPU emulator: runs CUDA kernels on the host with CUDA's execution
// model (a grid of blocks; each block's threads as fibers that meet at
// barriers; warps whose lanes meet at shuffles) and checks what a GPU
// punishes: accesses outside their buffer or view, misaligned accesses,
// shared or global memory that two threads touch with no barrier between,
// shared memory read before it is written, barriers and shuffles that not
// every thread reaches.
//
// Two kinds of kernel run on it: those in a kernel library (megc's
// generated kernels lowered for emulation, every access checked), and host
// builds of hand-written CUDA code, which call the functions at the end of
// this header for their thread ids, barriers and shuffles.
#ifndef MEGEMU_EMULATOR_H
#define MEGEMU_EMULATOR_H

#include "megemu/Abi.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace megemu {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

/// A launch that breaks CUDA's rules, or a kernel that does; the message
/// names the kernel, the block and thread, and what was wrong.
class EmulationError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One kernel of a library, from its manifest.
struct KernelInfo {
  std::string name;
  /// Arguments (pointers), not counting the workgroup buffers.
  unsigned args = 0;
  /// Bytes from each argument's pointer that the kernel's view of it
  /// spans (-1: not static).
  std::vector<int64_t> extents;
  struct Workgroup {
    uint64_t bytes, align;
  };
  std::vector<Workgroup> workgroup;
  void (*entry)(void **) = nullptr;
};

/// A shared object of kernels lowered for emulation (megemu/Abi.h), loaded
/// with its hooks bound to this emulator.
class KernelLibrary {
public:
  /// Loads `path`; throws EmulationError when it is not a kernel library of
  /// this ABI.
  explicit KernelLibrary(const std::string &path);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  /// The kernel `name`, or null.
  const KernelInfo *find(const std::string &name) const;
  const std::vector<KernelInfo> &kernels() const { return kernels_; }
  /// What site `index` is (an op and its location), for messages.
  std::string site(int32_t index) const;
  const std::string &path() const { return path_; }

private:
  std::string path_;
  void *handle_ = nullptr;
  std::vector<KernelInfo> kernels_;
  std::vector<std::string> sites_;
};

/// A kernel argument as the caller passes it: a pointer and the bytes the
/// caller owns from it (UINT64_MAX when it does not know).
struct Argument {
  void *pointer = nullptr;
  uint64_t bytes = UINT64_MAX;
};

struct LaunchConfig {
  Dim3 grid, block;
  uint32_t dynamicSharedBytes = 0;
};

/// The limits a launch is checked against (an H100's and H200's).
struct DeviceLimits {
  uint32_t maxThreadsPerBlock = 1024;
  Dim3 maxBlock{1024, 1024, 64};
  Dim3 maxGrid{2147483647u, 65535, 65535};
  /// Static plus dynamic shared memory of one block.
  uint64_t maxSharedPerBlock = 227 * 1024;
};

/// Runs `kernel` of `library` over the grid. Checks the configuration
/// against `limits` and every argument's extent against the bytes the
/// caller owns, then runs the blocks in order, each with its threads as
/// fibers and fresh workgroup buffers filled with a pattern that reads as
/// NaN; every access is checked as it happens. Throws EmulationError at the
/// first violation, naming the kernel by `label` (where empty, "kernel
/// 'name'").
void launch(const KernelLibrary &library, const KernelInfo &kernel,
            const LaunchConfig &config, const std::vector<Argument> &args,
            const std::string &label = "",
            const DeviceLimits &limits = DeviceLimits());

/// Runs `thread` once per thread of every block (a host build of a CUDA
/// kernel), with `config.dynamicSharedBytes` of dynamic shared memory per
/// block (dynamicShared()). Barriers and shuffles are checked as for a
/// library kernel; memory accesses are not.
void launchHost(const std::string &name, const LaunchConfig &config,
                const std::function<void()> &thread,
                const DeviceLimits &limits = DeviceLimits());

// For host builds of CUDA code, inside a thread launchHost runs.
Dim3 threadIdx();
Dim3 blockIdx();
Dim3 blockDim();
Dim3 gridDim();
/// __syncthreads().
void syncThreads();
/// __shfl_xor_sync and friends over the full warp: the 32 bits of the lane
/// the mode and offset name within segments of `width` lanes.
uint32_t shuffle(uint32_t bits, int32_t offset, int32_t width,
                 ShuffleMode mode);
/// The block's dynamic shared memory (extern __shared__).
void *dynamicShared();

} // namespace megemu

#endif // MEGEMU_EMULATOR_H
