// One entry of a program prepared for a CUDA device: device arena, input and
// output storage, its commands with every buffer resolved to a device
// address, and the CUDA graphs of its graph regions.
#ifndef MEGRT_SRC_CUDA_CUDAENTRY_H
#define MEGRT_SRC_CUDA_CUDAENTRY_H

#include "CollectiveCommand.h"
#include "Device.h"
#include "GraphRegions.h"
#include "cuda/CudaAttention.h"
#include "cuda/CudaEntryTrace.h"
#include "cuda/CudaGemm.h"
#include "cuda/CudaGraph.h"
#include "cuda/CudaLibrary.h"
#include "cuda/CudaModule.h"
#include "cuda/CudnnAttention.h"
#include "cuda/DeviceMemory.h"
#include "megrt/megc_generated.h"

#include <array>
#include <cuda.h>
#include <functional>
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
  /// Null when the program has no Attention or AttentionGrad command.
  const CudaAttention *attention;
  /// The library kernels the program calls.
  const CudaLibrary &library;
  /// cuDNN's attention, which an entry prepares its shapes on; null where
  /// it is not available, for the reason in cudnnUnavailable.
  CudnnAttention *cudnn;
  std::string cudnnUnavailable;
  /// The device's compute capability (major).
  int computeMajor;
  /// Receives one line per attention kernel choice worth telling the user
  /// (the device prints each distinct line once).
  std::function<void(const std::string &)> report;
  /// This rank's Cuda groups (empty for a program without a mesh).
  const SubmeshGroups &groups;
};

class CudaEntry {
public:
  /// Allocates the entry's device memory in the current context. `where`
  /// ("entry 'NAME'") prefixes errors. With options.trace, events to time
  /// its runs are created too.
  CudaEntry(const fb::Entry &entry, const std::string &where,
            const CudaEntryResources &resources, const DeviceOptions &options);

  /// Storage the caller fills before execute() and reads after.
  const std::vector<DeviceMemory> &inputs() const { return inputs_; }
  const std::vector<DeviceMemory> &outputs() const { return outputs_; }
  /// Indices of the parameters its buffers refer to: those a run may write.
  const std::vector<uint32_t> &parametersUsed() const {
    return parametersUsed_;
  }

  /// Enqueues every command in order on `stream`. With graphs, each graph
  /// region is captured into a CUDA graph on the first run and launched as
  /// that graph; later runs only launch it. Collectives are ordered on the
  /// stream by their groups; a run that fails with async collectives in
  /// flight abandons them, and later runs fail.
  void execute(CUstream stream);

  /// After the stream finished a run: adds the run's events to `trace`
  /// (tracing only), timed from `origin`.
  void collectTrace(Trace &trace, const CudaEvent &origin) const;

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
  /// A KernelLaunch command: the kernel's CUDA launches, in order.
  using Kernel = std::vector<Launch>;
  struct Copy {
    CUdeviceptr src;
    CUdeviceptr dst;
    /// 0 when there is nothing to copy (no bytes, or onto itself).
    size_t bytes;
    /// Source and destination overlap: go through copyTemp_.
    bool overlapping;
    std::string where;
  };
  /// The operands of AttentionOperands resolved to device addresses; the
  /// scratch is the entry's attentionScratch_. Runs through cuDNN when
  /// `cudnn` is set, else on the runtime's own kernels.
  struct Attention {
    AttentionShape shape;
    bool backward;
    CUdeviceptr q, k, v, out, gradOut, gradQ, gradK, gradV;
    /// The softmax statistics the forward writes or the backward reads, or
    /// 0.
    CUdeviceptr stats;
    /// The queries' positions, or 0.
    CUdeviceptr positions;
    const CudaAttention *kernels;
    const CudnnAttention *cudnn;
  };
  /// A LibraryCall prepared by its kernel (the scratch is the entry's
  /// libraryScratch_).
  struct LibraryCall {
    CudaLibraryRun run;
  };
  /// Completes the async collective at command `collective`.
  struct Wait {
    uint32_t collective;
  };
  /// One per command of the artifact, in order (a slice is a Copy).
  using Command = std::variant<Kernel, CudaGemm, Copy, Attention, LibraryCall,
                               CollectiveCall, Wait>;

  CUdeviceptr resolve(const fb::Buffer &buffer,
                      const CudaEntryResources &resources);
  Kernel resolveKernel(const fb::KernelLaunch &launch,
                       const std::vector<CUdeviceptr> &buffers,
                       const CudaEntryResources &resources,
                       const std::string &where) const;
  void enqueue(const Command &command, CUstream stream) const;
  void runCommand(uint32_t index, CUstream stream);
  void runRegion(size_t index, CUstream stream);
  void runLaunch(const Launch &launch, CUstream stream) const;
  void runCopy(const Copy &copy, CUstream stream) const;

  DeviceMemory arena_;
  std::vector<DeviceMemory> inputs_;
  std::vector<DeviceMemory> outputs_;
  /// Holds the source of overlapping copies (CUDA copies have no memmove
  /// semantics). Allocated with the entry, so that graphs capture its
  /// address.
  DeviceMemory copyTemp_;
  /// The scratch of the attention commands (the largest any one needs),
  /// allocated with the entry for the same reason.
  DeviceMemory attentionScratch_;
  /// The scratch of the library calls (the largest any one needs).
  DeviceMemory libraryScratch_;
  std::vector<Command> commands_;
  std::vector<uint32_t> parametersUsed_;
  std::vector<GraphRegion> regions_;
  /// Per region, "entry 'NAME', graph region 'R' (commands A to B)".
  std::vector<std::string> regionWhere_;
  /// Per region, empty until its first run captures it.
  std::vector<CudaGraph> graphs_;
  bool useGraphs_;
  /// Null when tracing is off.
  std::unique_ptr<CudaEntryTrace> trace_;
  CollectivesInFlight collectives_;
};

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDAENTRY_H
