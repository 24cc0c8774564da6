//===- CpuCodegen.cpp - kernels to a host shared object ----------------===//
//
// Runs the CPU pipelines on the kernel module (bufferization, strategy,
// dispatch grid, dispatch functions), reads each kernel's dispatch table,
// lowers the dispatch functions to LLVM, adds a
// `void <dispatch>_entry(void **args, uint32_t workgroup, uint32_t count)`
// wrapper per dispatch, optimises, emits an object for the host and links
// it into a shared object with lld.
//
//===----------------------------------------------------------------------===//

#include "HostObject.h"
#include "KernelTables.h"
#include "megc/Compiler/CompilePipeline.h"
#include "megc/Compiler/Program.h"
#include "megc/Kernels/Pipelines.h"

#include "megrt/CpuFeatures.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

namespace megc {

namespace {

/// Adds `void <name>_entry(void **args, uint32_t workgroup, uint32_t
/// count)` calling the dispatch function with its buffers loaded from
/// `args` and the workgroup id (the grid is static in the code: `count` is
/// not read).
void addEntryWrapper(llvm::Module &module, llvm::Function &dispatch) {
  llvm::LLVMContext &context = module.getContext();
  auto *ptr = llvm::PointerType::getUnqual(context);
  auto *i32 = llvm::Type::getInt32Ty(context);
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(context),
                                       {ptr, i32, i32}, false);
  auto *wrapper =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                             dispatch.getName() + "_entry", module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", wrapper));
  llvm::SmallVector<llvm::Value *> args;
  unsigned buffers = dispatch.arg_size() - 1;
  for (unsigned i = 0; i < buffers; ++i) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, wrapper->getArg(0), i);
    args.push_back(b.CreateLoad(ptr, slot));
  }
  args.push_back(
      b.CreateZExt(wrapper->getArg(1), dispatch.getArg(buffers)->getType()));
  b.CreateCall(&dispatch, args);
  b.CreateRetVoid();
  dispatch.setLinkage(llvm::GlobalValue::InternalLinkage);
}

/// The extensions the options' CPU ISA names: none for x86-64; for native,
/// those of the host that megrt can check (megrt/CpuFeatures.h).
std::vector<std::string> cpuFeatures(CpuIsa isa) {
  std::vector<std::string> features;
  if (isa != CpuIsa::Native)
    return features;
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  for (const char *feature : megrt::kCheckableCpuFeatures)
    if (host.lookup(feature))
      features.push_back(feature);
  return features;
}

/// The widest vector registers `features` provide.
unsigned vectorBits(const std::vector<std::string> &features) {
  if (llvm::is_contained(features, "avx512f"))
    return 512;
  if (llvm::is_contained(features, "avx2") ||
      llvm::is_contained(features, "avx"))
    return 256;
  return 128;
}

} // namespace

FailureOr<CpuModuleDesc> compileCpuKernels(const ProgramDesc &program,
                                           const CompileOptions &options) {
  ModuleOp kernels = ModuleOp(program.kernelModule.get()).clone();
  OwningOpRef<ModuleOp> owner(kernels);
  MLIRContext *context = kernels.getContext();
  std::vector<std::string> features = cpuFeatures(options.cpuIsa);

  OpPassManager distribution(ModuleOp::getOperationName());
  buildKernelBufferizationPipeline(distribution);
  buildCpuDistributionPipeline(distribution, vectorBits(features));
  if (failed(runPipeline(kernels, distribution)))
    return failure();
  FailureOr<std::vector<KernelCodeDesc>> codes =
      readCpuDispatchTables(kernels, program);
  if (failed(codes))
    return failure();
  OpPassManager lowering(ModuleOp::getOperationName());
  buildCpuLoweringPipeline(lowering, llvm::is_contained(features, "fma"));
  if (failed(runPipeline(kernels, lowering)))
    return failure();

  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmContext, "megc-kernels");
  if (!module)
    return emitError(kernels.getLoc()) << "translation to LLVM IR failed";
  for (const KernelCodeDesc &code : *codes)
    for (const DispatchDesc &dispatch : code.dispatches) {
      StringRef name = StringRef(dispatch.entry).drop_back(strlen("_entry"));
      llvm::Function *function = module->getFunction(name);
      if (!function)
        return emitError(kernels.getLoc()) << "dispatch function '" << name
                                           << "' is missing after lowering";
      addEntryWrapper(*module, *function);
    }

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      hostTargetMachine(features, error);
  if (!machine)
    return emitError(kernels.getLoc()) << "no host target: " << error;
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(machine->getTargetTriple());
  optimize(*module, *machine);
  addBf16Truncation(*module);
  std::string llvmIr;
  if (options.emit == Emit::Llvm) {
    llvm::raw_string_ostream os(llvmIr);
    module->print(os, nullptr);
  }

  FailureOr<std::string> linked =
      emitSharedObject(kernels, *module, *machine);
  if (failed(linked))
    return failure();
  return CpuModuleDesc{std::move(*linked), features, std::move(*codes),
                       std::move(llvmIr)};
}

} // namespace megc
