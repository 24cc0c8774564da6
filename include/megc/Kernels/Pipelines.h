//===- Pipelines.h - the back end's pass pipelines --------------*- C++ -*-===//
//
// The kernel pipelines, built in code from typed options: bufferization,
// the CPU realisation and lowering to LLVM, and the GPU mapping. megc runs
// them; megc-opt knows them by name.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_KERNELS_PIPELINES_H
#define MEGC_KERNELS_PIPELINES_H

#include "megc/Target/CudaArch.h"

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
/// meg-set-target (cpu, `vectorBits`), meg-select-kernel-strategy,
/// meg-distribute-workgroups, meg-outline-cpu-dispatches, canonicalize.
void buildCpuDistributionPipeline(mlir::OpPassManager &pm, unsigned vectorBits);

/// The dispatch functions to the LLVM dialect (`meg-lower-cpu-kernels`):
/// meg-drop-dispatch-hosts (the dispatch tables have been read), vectorizable
/// reductions and math (keeping fused multiply-adds when the CPU has
/// `fma`), loops, bare-pointer calls.
void buildCpuLoweringPipeline(mlir::OpPassManager &pm, bool fma);

/// Strategy and GPU launches for `arch` (`meg-map-cuda-kernels`):
/// meg-set-target (cuda, `arch`), meg-select-kernel-strategy,
/// meg-distribute-workgroups, meg-map-kernels-to-gpu, gpu-kernel-outlining,
/// canonicalize.
void buildGpuMappingPipeline(mlir::OpPassManager &pm, const CudaArch &arch);

/// The device passes before the NVVM conversion, nested on every gpu.module
/// (`meg-prepare-cuda-device`): expand-strided-metadata, lower-affine,
/// convert-scf-to-cf, meg-lower-gpu-reductions, arith-expand (bf16). What
/// they produce is what the NVVM conversion and the GPU emulation receive.
void buildGpuDevicePreparation(mlir::OpPassManager &pm, const CudaArch &arch);

/// Prepared gpu.modules to host code in the LLVM dialect for the GPU
/// emulator (`meg-lower-gpu-emulation`): meg-gpu-to-host-emulation, then
/// the host lowering (vector, math through libm, memref, arith, control
/// flow, bare-pointer functions).
void buildGpuEmulationPipeline(mlir::OpPassManager &pm);

/// The outlined gpu.module to PTX for `arch` through NVVM (the device
/// preparation, then convert-gpu-to-nvvm), the toolkit at `toolkit`
/// providing libdevice.
void buildNvvmPipeline(mlir::OpPassManager &pm, const CudaArch &arch,
                       llvm::StringRef toolkit);

/// Registers the pipelines above by name for megc-opt.
void registerKernelPipelines();

} // namespace megc

#endif // MEGC_KERNELS_PIPELINES_H
