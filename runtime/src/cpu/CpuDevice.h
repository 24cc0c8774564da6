// The CPU device: entries run on the host, directly on the parameters'
// host tensors.
#ifndef MEGRT_SRC_CPU_CPUDEVICE_H
#define MEGRT_SRC_CPU_CPUDEVICE_H

#include "Device.h"
#include "MeshLayout.h"
#include "cpu/CpuEntry.h"
#include "cpu/CpuModule.h"
#include "cpu/ThreadPool.h"
#include "megrt/AlignedBuffer.h"

#include <memory>
#include <vector>

namespace megrt {

class CpuDevice final : public Device {
public:
  /// Loads the program's CPU module and, in a world, creates the host
  /// groups of the program's collectives.
  CpuDevice(const Program &program, std::vector<Tensor> &parameters,
            const DeviceOptions &options);

  void run(size_t index, const std::vector<const Tensor *> &inputs,
           std::vector<Tensor> &outputs) override;
  // Kernels use the host tensors themselves: nothing to mirror.
  void parameterWritten(size_t) override {}
  void parameterRead(size_t) override {}

private:
  Program program_;
  std::vector<Tensor> &parameters_;
  CpuModule module_;
  DeviceOptions options_;
  /// The session's pool (DeviceOptions::pool).
  ThreadPool &pool_;
  /// The kernels' temporaries and partials: one area of the largest
  /// kernel's size, kernels running one at a time.
  AlignedBuffer scratch_;
  /// One per entry, prepared on its first run.
  std::vector<std::unique_ptr<CpuEntry>> entries_;
  /// Declared after the entries, so that the groups go first: a collective
  /// abandoned by a failed run must not outlive the buffers it writes.
  SubmeshGroups groups_;
};

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUDEVICE_H
