//===- Pipelines.h - the back end's pass pipelines --------------*- C++ -*-===//
//
// The kernel pipelines, built in code from typed options: bufferization,
// the CPU realisation and lowering to LLVM, and the GPU mapping. megc runs
// them; megc-opt knows them by name.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_KERNELS_PIPELINES_H
#define MEGC_KERNELS_PIPELINES_H

#include "megc/Kernels/CudaArch.h"

#include "mlir/Pass/PassManager.h"

namespace megc {

/// meg ops on tensors to destination-passing kernels in linalg on memrefs
/// (`meg-bufferize-kernels`): convert-meg-to-linalg, meg-prepare-kernels,
/// one-shot bufferization with every result an out-parameter,
/// meg-update-in-place, cse, canonicalize, meg-forward-results,
/// meg-copies-to-linalg. Temporaries stay `memref.alloc` at the top level of
/// each kernel: they become its scratch.
void buildKernelBufferizationPipeline(mlir::OpPassManager &pm);

/// Strategy and dispatch grid for the CPU (`meg-distribute-cpu-kernels`):
/// meg-select-kernel-strategy{target=cpu}, meg-distribute-workgroups,
/// meg-outline-cpu-dispatches, canonicalize.
void buildCpuDistributionPipeline(mlir::OpPassManager &pm, unsigned vectorBits);

/// The dispatch functions to the LLVM dialect (`meg-lower-cpu-kernels`):
/// meg-drop-dispatch-hosts (the dispatch tables have been read), vectorizable
/// reductions and math (keeping fused multiply-adds when the CPU has
/// `fma`), loops, bare-pointer calls.
void buildCpuLoweringPipeline(mlir::OpPassManager &pm, bool fma);

/// Strategy and GPU launches for `arch` (`meg-map-cuda-kernels`):
/// meg-select-kernel-strategy{target=cuda}, meg-map-kernels-to-gpu,
/// gpu-kernel-outlining, canonicalize.
void buildGpuMappingPipeline(mlir::OpPassManager &pm, const CudaArch &arch);

/// The outlined gpu.module to PTX for `arch` through NVVM, the toolkit at
/// `toolkit` providing libdevice.
void buildNvvmPipeline(mlir::OpPassManager &pm, const CudaArch &arch,
                       llvm::StringRef toolkit);

/// Registers the pipelines above by name for megc-opt.
void registerKernelPipelines();

} // namespace megc

#endif // MEGC_KERNELS_PIPELINES_H
