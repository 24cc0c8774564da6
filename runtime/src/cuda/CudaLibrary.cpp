// The library kernels a program calls, loaded into a CUDA context through
// the table megrt/LibraryKernels.def makes.
#include "cuda/CudaLibrary.h"

#include "FbTypes.h"

#include <string>

namespace megrt {
namespace {

/// In the order of libraryKernels().
library::CudaLoadFn *const kLoaders[] = {
#define MEGRT_LIBRARY_KERNEL(symbol, reads, writes, params)                    \
  &library::cuda_##symbol,
#include "megrt/LibraryKernels.def"
#undef MEGRT_LIBRARY_KERNEL
};

} // namespace

CudaLibraryKernel::~CudaLibraryKernel() = default;

CudaLibrary::CudaLibrary(const fb::Program &program, const CudaContext &context)
    : kernels_(libraryKernels().size()) {
  for (uint32_t e = 0; e < sizeOf(program.entries()); ++e) {
    const fb::Entry &entry = *program.entries()->Get(e);
    for (uint32_t c = 0; c < sizeOf(entry.commands()); ++c) {
      const fb::LibraryCall *call =
          entry.commands()->Get(c)->op_as_LibraryCall();
      if (!call)
        continue;
      // Verification has checked that every call names a kernel.
      const LibraryKernelSignature *kernel =
          findLibraryKernel(toString(call->name()));
      size_t index = kernel - libraryKernels().data();
      if (!kernels_[index])
        kernels_[index] = kLoaders[index](context);
    }
  }
}

CudaLibrary::~CudaLibrary() = default;

const CudaLibraryKernel &
CudaLibrary::kernel(const LibraryCallInfo &call) const {
  return *kernels_[call.kernel - libraryKernels().data()];
}

} // namespace megrt
