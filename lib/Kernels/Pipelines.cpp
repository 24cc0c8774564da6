//===- Pipelines.cpp - the back end's pass pipelines -------------------===//
//
// Every kernel pipeline built from pass constructors and typed options,
// and registered by name so that megc-opt runs exactly what megc runs.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Pipelines.h"

#include "megc/Conversion/Passes.h"
#include "megc/Kernels/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace megc {

void buildKernelBufferizationPipeline(OpPassManager &pm) {
  pm.addPass(meg::createConvertMegToLinalg());
  // Work that ops fused into one kernel share is computed once: the row
  // statistics of a cross-entropy and its gradient.
  pm.addPass(createCSEPass());
  pm.addPass(createMegPrepareKernels());
  pm.addPass(createCanonicalizerPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Results become out-parameters (of public functions too: kernels are),
  // and statically shaped temporaries move to the top of each kernel.
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createMegUpdateInPlace());
  // Loop results that are the loop's own buffer fold away, so that
  // meg-forward-results sees the temporary each result is copied from, and
  // copies of a view into itself go.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createMegForwardResults());
  pm.addPass(createMegCopiesToLinalg());
}

namespace {

/// Loops on memrefs to the LLVM dialect for the host: vectors, math (LLVM's
/// intrinsics, else libm), memrefs, arithmetic, control flow, functions
/// with one pointer per buffer (the descriptor ABI defeats the vectorizer,
/// and GPU kernels take bare pointers too), indices, poison.
void addHostToLlvm(OpPassManager &pm) {
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcs;
  funcs.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcs));
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

} // namespace

void buildCpuDistributionPipeline(OpPassManager &pm, unsigned vectorBits) {
  pm.addPass(createMegSetCpuTarget(vectorBits));
  pm.addPass(createMegSelectKernelStrategy());
  pm.addPass(createMegDistributeWorkgroups());
  pm.addPass(createMegOutlineCpuDispatches());
  // After outlining: before, it would fold the forall of a one-workgroup
  // dispatch into the kernel function (it folds it into a plain call now).
  pm.addPass(createCanonicalizerPass());
}

void buildCpuLoweringPipeline(OpPassManager &pm, bool fma) {
  pm.addPass(createMegDropDispatchHosts());
  pm.addNestedPass<func::FuncOp>(createMegReassociateReductions());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  MegApproximateMathOptions math;
  math.fma = fma;
  pm.addNestedPass<func::FuncOp>(createMegApproximateMath(math));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addNestedPass<func::FuncOp>(createMegExpandBf16());
  addHostToLlvm(pm);
}

void buildGpuMappingPipeline(OpPassManager &pm, const CudaArch &arch) {
  // A softmax's or cross-entropy's row statistics in one read of the row:
  // the warp and block reductions combine (maximum, sum) pairs.
  pm.addNestedPass<func::FuncOp>(createMegOnlineSoftmax());
  pm.addPass(createMegSetCudaTarget(arch));
  pm.addPass(createMegSelectKernelStrategy());
  pm.addPass(createMegDistributeWorkgroups());
  MegMapKernelsToGpuOptions mapping;
  mapping.threadsPerBlock = arch.threadsPerBlock();
  mapping.stageBytes = arch.stageBytes();
  pm.addPass(createMegMapKernelsToGpu(mapping));
  pm.addPass(createGpuKernelOutliningPass());
  MegAlignWorkgroupBuffersOptions align;
  align.alignment = arch.vectorBytes();
  pm.addNestedPass<gpu::GPUModuleOp>(createMegAlignWorkgroupBuffers(align));
  pm.addPass(createCanonicalizerPass());
}

void buildGpuDevicePreparation(OpPassManager &pm, const CudaArch &arch) {
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(memref::createExpandStridedMetadataPass());
  device.addPass(createLowerAffinePass());
  device.addPass(createSCFToControlFlowPass());
  MegLowerGpuReductionsOptions reductions;
  reductions.subgroupSize = arch.warpSize();
  device.addPass(createMegLowerGpuReductions(reductions));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  device.addPass(arith::createArithExpandOpsPass(expand));
}

void buildNvvmPipeline(OpPassManager &pm, const CudaArch &arch,
                       StringRef toolkit) {
  GpuNVVMAttachTargetOptions target;
  target.chip = arch.name();
  target.features = arch.ptxFeature();
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  buildGpuDevicePreparation(pm, arch);
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  pm.nest<gpu::GPUModuleOp>().addPass(createConvertGpuOpsToNVVMOps(nvvm));
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = toolkit.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void buildGpuEmulationPipeline(OpPassManager &pm) {
  pm.addPass(createMegGpuToHostEmulation());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  addHostToLlvm(pm);
}

namespace {

struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  Option<unsigned> vectorBits{*this, "vector-bits",
                              llvm::cl::desc("CPU vector register width"),
                              llvm::cl::init(128)};
};

struct CpuLoweringOptions : public PassPipelineOptions<CpuLoweringOptions> {
  Option<bool> fma{*this, "fma",
                   llvm::cl::desc("The CPU has fused multiply-add"),
                   llvm::cl::init(false)};
};

struct CudaPipelineOptions : public PassPipelineOptions<CudaPipelineOptions> {
  Option<std::string> cudaArch{*this, "cuda-arch",
                               llvm::cl::desc("CUDA architecture"),
                               llvm::cl::init(MEGC_DEFAULT_CUDA_ARCH)};
  Option<std::string> toolkit{*this, "toolkit",
                              llvm::cl::desc("CUDA toolkit (libdevice)"),
                              llvm::cl::init("/usr/local/cuda")};
};

/// The architecture a pipeline option names; sm_90 (after a diagnostic on
/// standard error) when it names none.
CudaArch archOf(const CudaPipelineOptions &options) {
  llvm::Expected<CudaArch> arch =
      CudaArch::parse(options.cudaArch, "cuda-arch");
  if (arch)
    return *arch;
  llvm::errs() << llvm::toString(arch.takeError()) << "\n";
  return CudaArch();
}

} // namespace

void registerKernelPipelines() {
  PassPipelineRegistration<>(
      "meg-bufferize-kernels",
      "meg kernels on tensors to destination-passing linalg on memrefs",
      buildKernelBufferizationPipeline);
  PassPipelineRegistration<CpuPipelineOptions>(
      "meg-distribute-cpu-kernels",
      "Strategy, dispatch grid and dispatch functions for the CPU",
      [](OpPassManager &pm, const CpuPipelineOptions &options) {
        buildCpuDistributionPipeline(pm, options.vectorBits);
      });
  PassPipelineRegistration<CpuLoweringOptions>(
      "meg-lower-cpu-kernels", "CPU dispatch functions to the LLVM dialect",
      [](OpPassManager &pm, const CpuLoweringOptions &options) {
        buildCpuLoweringPipeline(pm, options.fma);
      });
  PassPipelineRegistration<CudaPipelineOptions>(
      "meg-map-cuda-kernels",
      "Strategy, dispatch grid and GPU launches for a CUDA target",
      [](OpPassManager &pm, const CudaPipelineOptions &options) {
        buildGpuMappingPipeline(pm, archOf(options));
      });
  PassPipelineRegistration<CudaPipelineOptions>(
      "meg-prepare-cuda-device",
      "Outlined GPU kernels as the NVVM conversion receives them",
      [](OpPassManager &pm, const CudaPipelineOptions &options) {
        buildGpuDevicePreparation(pm, archOf(options));
      });
  PassPipelineRegistration<>(
      "meg-lower-gpu-emulation",
      "Prepared GPU kernels to host code in the LLVM dialect for the GPU "
      "emulator (tests)",
      buildGpuEmulationPipeline);
  PassPipelineRegistration<CudaPipelineOptions>(
      "meg-lower-cuda-kernels", "Outlined GPU kernels to PTX through NVVM",
      [](OpPassManager &pm, const CudaPipelineOptions &options) {
        buildNvvmPipeline(pm, archOf(options), options.toolkit);
      });
}

} // namespace megc
