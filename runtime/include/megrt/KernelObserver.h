// A hook around every kernel launch of a cpu device, for debugging a
// program command by command; the GPU conformance check
// (test/tools/megc-gpu-check) runs each launch's CUDA kernel on the GPU
// emulator from it and compares what both wrote.
#ifndef MEGRT_KERNELOBSERVER_H
#define MEGRT_KERNELOBSERVER_H

#include <cstdint>
#include <vector>

namespace megrt {

/// One buffer of a launch: where it is and its bytes.
struct KernelArgument {
  uint8_t *data;
  uint64_t bytes;
};

class KernelObserver {
public:
  virtual ~KernelObserver() = default;
  /// Kernel `kernel` (its index in Program's kernels) is about to run on
  /// `args`, its launch's buffers (inputs, then outputs; an output may be
  /// an input's storage, updated in place).
  virtual void beforeLaunch(uint32_t kernel,
                            const std::vector<KernelArgument> &args) = 0;
  /// It ran; throwing here stops the entry's run with that error.
  virtual void afterLaunch(uint32_t kernel,
                           const std::vector<KernelArgument> &args) = 0;
};

} // namespace megrt

#endif // MEGRT_KERNELOBSERVER_H
