// One entry of a program prepared for a CUDA device: device arena, input and
// output storage, and its commands with every buffer resolved to a device
// address.
#ifndef MEGRT_SRC_CUDA_CUDAENTRY_H
#define MEGRT_SRC_CUDA_CUDAENTRY_H

#include "cuda/CudaGemm.h"
#include "cuda/CudaModule.h"
#include "cuda/DeviceMemory.h"
#include "megrt/megc_generated.h"

#include <array>
#include <cuda.h>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace megrt {

/// What an entry's commands run with, owned by the device.
struct CudaEntryResources {
  const fb::Program &program;
  const CudaModule &module;
  /// Device address of each parameter (0 for an empty one).
  const std::vector<CUdeviceptr> &parameters;
  /// The scratch area every kernel's CUDA launches share.
  CUdeviceptr scratch;
  /// Null when the program has no Gemm command.
  const CublasLtContext *cublas;
};

class CudaEntry {
public:
  /// Allocates the entry's device memory in the current context. `where`
  /// ("entry 'NAME'") prefixes errors.
  CudaEntry(const fb::Entry &entry, const std::string &where,
            const CudaEntryResources &resources);

  /// Storage the caller fills before execute() and reads after.
  const std::vector<DeviceMemory> &inputs() const { return inputs_; }
  const std::vector<DeviceMemory> &outputs() const { return outputs_; }
  /// Indices of the parameters its buffers refer to: those a run may write.
  const std::vector<uint32_t> &parametersUsed() const {
    return parametersUsed_;
  }

  /// Enqueues every command in order on `stream`.
  void execute(CUstream stream) const;

private:
  struct Launch {
    CUfunction function;
    std::array<unsigned, 3> grid;
    std::array<unsigned, 3> block;
    unsigned sharedBytes;
    // kernelParams[i] points at values[i]: both live on the heap so that
    // moving a Launch keeps the pointers valid.
    std::unique_ptr<CUdeviceptr[]> values;
    std::unique_ptr<void *[]> kernelParams;
    std::string where;
  };
  struct Copy {
    CUdeviceptr src;
    CUdeviceptr dst;
    size_t bytes;
    /// Source and destination overlap: go through copyTemp_.
    bool overlapping;
    std::string where;
  };
  using Command = std::variant<Launch, CudaGemm, Copy>;

  CUdeviceptr resolve(const fb::Buffer &buffer,
                      const CudaEntryResources &resources);
  void addLaunches(const fb::KernelLaunch &launch,
                   const std::vector<CUdeviceptr> &buffers,
                   const CudaEntryResources &resources,
                   const std::string &where);
  void runLaunch(const Launch &launch, CUstream stream) const;
  void runCopy(const Copy &copy, CUstream stream) const;

  DeviceMemory arena_;
  std::vector<DeviceMemory> inputs_;
  std::vector<DeviceMemory> outputs_;
  /// Holds the source of overlapping copies (CUDA copies have no memmove
  /// semantics).
  DeviceMemory copyTemp_;
  std::vector<Command> commands_;
  std::vector<uint32_t> parametersUsed_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAENTRY_H
