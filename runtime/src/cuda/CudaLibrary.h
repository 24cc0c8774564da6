// The library kernels (megrt/LibraryKernels.def) on a CUDA device: each
// kernel a program calls, loaded into the device's context once, prepares
// the entries' LibraryCall commands for their stream.
#ifndef MEGRT_SRC_CUDA_CUDALIBRARY_H
#define MEGRT_SRC_CUDA_CUDALIBRARY_H

#include "library/LibraryCall.h"
#include "megrt/megc_generated.h"

#include <cuda.h>

#include <functional>
#include <memory>
#include <vector>

namespace megrt {

class CudaContext;

/// A call prepared for a stream: enqueues its work (captured into a graph
/// where the entry captures one).
using CudaLibraryRun = std::function<void(CUstream)>;

/// One library kernel loaded into a context.
class CudaLibraryKernel {
public:
  virtual ~CudaLibraryKernel();
  /// `call` with its operands' device addresses (0 when left out) and
  /// libraryScratchBytes(call) of scratch at `scratch` (64-byte aligned).
  virtual CudaLibraryRun prepare(const LibraryCallInfo &call,
                                 const std::vector<CUdeviceptr> &operands,
                                 CUdeviceptr scratch) const = 0;
};

/// The library kernels `program` calls, loaded into `context` (which must
/// outlive this object).
class CudaLibrary {
public:
  CudaLibrary(const fb::Program &program, const CudaContext &context);
  ~CudaLibrary();
  CudaLibrary(const CudaLibrary &) = delete;
  CudaLibrary &operator=(const CudaLibrary &) = delete;

  /// The loaded kernel of a call of this program.
  const CudaLibraryKernel &kernel(const LibraryCallInfo &call) const;

private:
  /// In the order of libraryKernels(); null for those the program does not
  /// call.
  std::vector<std::unique_ptr<CudaLibraryKernel>> kernels_;
};

namespace library {
using CudaLoadFn = std::unique_ptr<CudaLibraryKernel>(const CudaContext &);
#define MEGRT_LIBRARY_KERNEL(symbol, reads, writes, params)                    \
  CudaLoadFn cuda_##symbol;
#include "megrt/LibraryKernels.def"
#undef MEGRT_LIBRARY_KERNEL
} // namespace library

} // namespace megrt

#endif // MEGRT_SRC_CUDA_CUDALIBRARY_H
