// The part of a Session that differs between devices: where parameters
// live and how entries run.
#ifndef MEGRT_SRC_DEVICE_H
#define MEGRT_SRC_DEVICE_H

#include "megrt/KernelObserver.h"
#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace megrt {

namespace comm {
class World;
}
class Trace;
class ThreadPool;

/// How a device runs entries, from the SessionOptions.
struct DeviceOptions {
  /// Run graph regions as graphs (CUDA graphs on a GPU, recorded command
  /// lists on the CPU) rather than command by command.
  bool graphs = true;
  /// Receives an event per entry run, graph run and command run outside a
  /// graph; null when tracing is off. Outlives the device.
  Trace *trace = nullptr;
  /// The world of a program with a mesh (null without one): the device
  /// creates the groups its collectives run on (connectGroups), in its own
  /// memory space.
  comm::World *world = nullptr;
  /// The session's host threads (SessionOptions::threads of them): a cpu
  /// device runs its kernels, GEMMs and attention on them, and the session
  /// initialises parameters on them. Outlives the device; required for a
  /// cpu device.
  ThreadPool *pool = nullptr;
  /// A cpu device calls it around every kernel launch (SessionOptions::
  /// kernelObserver); null for none.
  KernelObserver *kernelObserver = nullptr;
};

/// Executes a program's entries. The Session keeps the parameters' host
/// tensors as the source of truth for its API and tells the device when one
/// is written or about to be read, so that a device with its own memory can
/// mirror them.
class Device {
public:
  virtual ~Device() = default;

  /// Runs entry `index` of the program; `inputs` match the entry's inputs
  /// (in order, dtype and shape checked). Writes its outputs, in order,
  /// into `outputs` (see prepareOutputs): a tensor there from an earlier
  /// run keeps its storage.
  virtual void run(size_t index, const std::vector<const Tensor *> &inputs,
                   std::vector<Tensor> &outputs) = 0;

  /// The host tensor of parameter `index` was overwritten.
  virtual void parameterWritten(size_t index) = 0;
  /// The host tensor of parameter `index` is about to be read: bring it up to
  /// date with the device's copy.
  virtual void parameterRead(size_t index) = 0;
};

/// Makes `outputs` one tensor per spec, of its dtype and shape: a tensor
/// already in place with both keeps its storage (its values are about to be
/// overwritten), any other is replaced by a new one.
void prepareOutputs(const std::vector<TensorSpec> &specs,
                    std::vector<Tensor> &outputs);

/// Creates the device named `name` ("cpu", "cuda" or "cuda:N"; "cuda" is
/// the CUDA device of the rank's local rank in a world of more than one
/// rank). `parameters` holds one host tensor per program parameter (this
/// rank's piece of a sharded one), never reallocated, and outlives the
/// device.
std::unique_ptr<Device> createDevice(const std::string &name,
                                     const Program &program,
                                     std::vector<Tensor> &parameters,
                                     const DeviceOptions &options);

} // namespace megrt

#endif // MEGRT_SRC_DEVICE_H
