// The runtime's own CUDA kernels (runtime/src/cuda/**/*.cu) in the
// stand-in: host builds of the same sources (FlashAttentionOnHost.cpp,
// EmbeddingGradOnHost.cpp) found by the names the runtime asks its fatbins
// for, each with its launch contract (parameter struct, threads, dynamic
// shared memory) from the headers the kernels and the runtime share.
#ifndef MEGEMU_STANDIN_RUNTIMEKERNELS_H
#define MEGEMU_STANDIN_RUNTIMEKERNELS_H

#include "Standin.h"

#include <string>
#include <vector>

namespace megemu::standin {

struct RuntimeKernel {
  std::string name;
  /// The kernel's one parameter (a struct whose first `pointers` fields
  /// are device addresses, 0 where unused).
  size_t paramBytes;
  unsigned pointers;
  /// Threads its __launch_bounds__ allow, and the dynamic shared memory it
  /// needs (what the runtime must launch it with).
  unsigned maxThreads;
  uint32_t sharedBytes;
  /// The host build (this library's symbol `name`), and how one thread of
  /// it is called on the parameter struct.
  void *symbol;
  void (*call)(void *symbol, const void *params);

  /// What is wrong with a launch of it, or "".
  std::string check(void **params, const LaunchConfig &config,
                    const State &state) const;
  std::vector<uint8_t> copyParams(void **params) const;
  /// Runs the grid on the emulator.
  void run(const uint8_t *params, const LaunchConfig &config) const;
};

/// The host build of the runtime kernel `name`, or null.
const RuntimeKernel *findRuntimeKernel(const std::string &name);

} // namespace megemu::standin

#endif // MEGEMU_STANDIN_RUNTIMEKERNELS_H
