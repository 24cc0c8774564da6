//===- CudaCodegen.cpp - kernels to PTX and cubin ----------------------===//
//
// Runs the CUDA pipelines on the kernel module (bufferization, strategy,
// the GPU mapping: each loop nest collapsed to one dimension and tiled by
// the architecture's threads per block), reads each kernel's launches,
// gathers the outlined kernels into one gpu.module, lowers it through NVVM
// to PTX, and assembles a cubin with the toolkit's ptxas when it is there.
//
//===----------------------------------------------------------------------===//

#include "KernelTables.h"
#include "megc/Compiler/CompilePipeline.h"
#include "megc/Compiler/Program.h"
#include "megc/Kernels/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;

namespace megc {

namespace {

/// Moves every outlined gpu.func into one gpu.module of a new module, each
/// named after the (unique) module it was outlined into, with the constant
/// globals they read (the same name is the same global of the kernel module).
OwningOpRef<ModuleOp> gatherGpuFunctions(ModuleOp kernels) {
  OpBuilder builder(kernels.getContext());
  OwningOpRef<ModuleOp> gpuModules = ModuleOp::create(kernels.getLoc());
  (*gpuModules)
      ->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                builder.getUnitAttr());
  builder.setInsertionPointToEnd(gpuModules->getBody());
  auto merged =
      gpu::GPUModuleOp::create(builder, kernels.getLoc(), "megc_kernels");
  Block &body = merged.getBodyRegion().front();
  for (auto module :
       llvm::make_early_inc_range(kernels.getOps<gpu::GPUModuleOp>())) {
    for (Operation &op :
         llvm::make_early_inc_range(module.getBodyRegion().front())) {
      if (auto func = dyn_cast<gpu::GPUFuncOp>(op)) {
        func.setName(module.getName());
        func->moveBefore(&body, body.end());
      } else if (auto global = dyn_cast<memref::GlobalOp>(op)) {
        if (!SymbolTable::lookupSymbolIn(merged, global.getSymName()))
          global->moveBefore(&body, body.begin());
      }
    }
    module.erase();
  }
  return gpuModules;
}

std::string toolkitPath() {
  for (const char *name : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (std::optional<std::string> value = llvm::sys::Process::GetEnv(name))
      return *value;
  return "/usr/local/cuda";
}

/// Assembles `ptx` for `arch` with the toolkit's ptxas; empty (with a
/// warning) when ptxas is not installed.
FailureOr<std::string> assemble(ModuleOp anchor, StringRef ptx,
                                StringRef arch) {
  std::string toolkit = toolkitPath();
  llvm::SmallString<128> ptxas(toolkit);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  if (!llvm::sys::fs::can_execute(ptxas)) {
    llvm::WithColor::warning(llvm::errs(), "megc")
        << "ptxas not found at " << ptxas
        << " (set CUDA_HOME); the artifact carries PTX only\n";
    return std::string();
  }
  llvm::SmallString<128> ptxPath, cubinPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("megc-kernels", "ptx", fd, ptxPath))
    return emitError(anchor.getLoc()) << "cannot create a temporary file";
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  llvm::sys::fs::createTemporaryFile("megc-kernels", "cubin", cubinPath);
  std::string archFlag = ("-arch=" + arch).str();
  llvm::StringRef args[] = {ptxas, archFlag, "-o", cubinPath, ptxPath};
  std::string message;
  int status =
      llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, {}, 0, 0, &message);
  llvm::sys::fs::remove(ptxPath);
  auto cubin = llvm::MemoryBuffer::getFile(cubinPath);
  llvm::sys::fs::remove(cubinPath);
  if (status != 0 || !cubin)
    return emitError(anchor.getLoc())
           << "ptxas rejected the generated PTX for " << arch
           << (message.empty() ? "" : ": " + message);
  return (*cubin)->getBuffer().str();
}

} // namespace

FailureOr<CudaKernelMapping> mapCudaKernels(const ProgramDesc &program,
                                            const CompileOptions &options,
                                            bool prepare) {
  ModuleOp kernels = ModuleOp(program.kernelModule.get()).clone();
  OwningOpRef<ModuleOp> owner(kernels);
  OpPassManager mapping(ModuleOp::getOperationName());
  buildKernelBufferizationPipeline(mapping);
  buildGpuMappingPipeline(mapping, options.cudaArch);
  if (failed(runPipeline(kernels, mapping)))
    return failure();
  FailureOr<std::vector<KernelCodeDesc>> codes =
      readCudaLaunchTables(kernels, program);
  if (failed(codes))
    return failure();
  CudaKernelMapping result;
  result.device = gatherGpuFunctions(kernels);
  result.kernels = std::move(*codes);
  if (prepare) {
    OpPassManager preparation(ModuleOp::getOperationName());
    buildGpuDevicePreparation(preparation, options.cudaArch);
    if (failed(runPipeline(*result.device, preparation)))
      return failure();
  }
  return result;
}

FailureOr<CudaModuleDesc> compileCudaKernels(const ProgramDesc &program,
                                             const CompileOptions &options) {
  const CudaArch &arch = options.cudaArch;
  FailureOr<CudaKernelMapping> mapped =
      mapCudaKernels(program, options, /*prepare=*/false);
  if (failed(mapped))
    return failure();
  ModuleOp gpuModules = *mapped->device;
  MLIRContext *context = gpuModules.getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  registerGPUDialectTranslation(*context);
  registerNVVMDialectTranslation(*context);
  OpPassManager lowering(ModuleOp::getOperationName());
  buildNvvmPipeline(lowering, arch, toolkitPath());
  if (failed(runPipeline(gpuModules, lowering)))
    return failure();

  CudaModuleDesc cuda;
  cuda.arch = arch.name();
  gpuModules->walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects())
      cuda.ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  if (cuda.ptx.empty())
    return emitError(gpuModules.getLoc()) << "no PTX was generated";
  FailureOr<std::string> cubin = assemble(gpuModules, cuda.ptx, cuda.arch);
  if (failed(cubin))
    return failure();
  cuda.cubin = std::move(*cubin);
  cuda.kernels = std::move(mapped->kernels);
  return cuda;
}

} // namespace megc
