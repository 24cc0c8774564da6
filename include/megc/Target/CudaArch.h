//===- CudaArch.h - the CUDA architecture the kernels are for --*- C++ -*-===//
//
// A CUDA architecture name parsed once into the description that the
// strategy selection, the GPU mapping and the NVVM lowering read.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_KERNELS_CUDAARCH_H
#define MEGC_KERNELS_CUDAARCH_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

/// The architecture megc compiles CUDA code for unless told otherwise (a
/// macro, so that ODS pass options and CompileFlags.def can name it).
#define MEGC_DEFAULT_CUDA_ARCH "sm_90"

namespace megc {

/// A CUDA architecture such as sm_90, sm_90a or sm_100a, parsed once.
struct CudaArch {
  /// Compute capability: 9.0 for sm_90.
  unsigned major = 9, minor = 0;
  /// The suffix: 'a' (architecture-specific instructions such as Hopper's
  /// wgmma, code that runs on that chip only), 'f' (family-specific) or 0.
  char suffix = 0;

  /// "sm_90a".
  std::string name() const;
  /// major * 10 + minor: 90 for sm_90a.
  unsigned number() const { return major * 10 + minor; }
  /// The oldest PTX ISA version the chip accepts, times ten (80 for
  /// sm_90): NVPTX aborts on an older one.
  unsigned ptxVersion() const;
  /// The NVPTX target feature for ptxVersion(): "+ptx80".
  std::string ptxFeature() const;
  /// Threads per block the generated kernels use.
  unsigned threadsPerBlock() const { return 256; }
  /// Bytes per vector memory access (128-bit loads and stores).
  unsigned vectorBytes() const { return 16; }
  /// Threads of a warp (the unit of shuffles and subgroup reductions).
  unsigned warpSize() const { return 32; }
  /// Streaming multiprocessors of the architecture's data-centre part
  /// (H100 and H200: 132; B200: 148), which grids are sized against.
  unsigned multiprocessors() const { return major >= 10 ? 148 : 132; }
  /// Resident blocks per multiprocessor the grids aim at (2048 threads per
  /// SM over blocks of threadsPerBlock()).
  unsigned blocksPerMultiprocessor() const { return 8; }
  /// Shared memory a block may fill with staged tiles: 24 KiB, so that
  /// blocksPerMultiprocessor() blocks, with their reductions' buffers, fit
  /// in the 228 KiB of a Hopper or Blackwell multiprocessor.
  unsigned stageBytes() const { return 24 * 1024; }

  /// Parses "sm_90", "sm_90a", "sm_100a", ...; the error names `what` (the
  /// flag or option the text came from) and the value, and lists what is
  /// accepted.
  static llvm::Expected<CudaArch>
  parse(llvm::StringRef text, llvm::StringRef what = "CUDA architecture");
};

} // namespace megc

#endif // MEGC_KERNELS_CUDAARCH_H
