//===- CpuCodegen.cpp - kernels to a host shared object ----------------===//
//
// Lowers the bufferized kernel functions to the LLVM dialect, adds a
// `void <name>_entry(void **args)` wrapper per kernel, optimises, emits an
// object for the host and links it into a shared object with lld.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "megc/Compiler/Program.h"

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
#include "megrt/CpuFeatures.h"

using namespace mlir;

namespace megc {

namespace {

constexpr llvm::StringLiteral kToLLVM =
    "builtin.module(func.func(convert-linalg-to-loops),expand-strided-metadata,"
    "lower-affine,"
    "convert-scf-to-cf,func.func(arith-expand{include-bf16=true}),"
    "convert-math-to-llvm,convert-math-to-libm,finalize-memref-to-llvm,"
    "convert-arith-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
    "convert-index-to-llvm,reconcile-unrealized-casts)";

/// Adds `void <name>_entry(void **args)` calling the kernel with its
/// arguments loaded from `args`.
void addEntryWrapper(llvm::Module &module, llvm::Function &kernel) {
  llvm::LLVMContext &context = module.getContext();
  auto *ptr = llvm::PointerType::getUnqual(context);
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr},
                                       false);
  auto *wrapper = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage, kernel.getName() + "_entry",
      module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", wrapper));
  llvm::SmallVector<llvm::Value *> args;
  for (unsigned i = 0; i < kernel.arg_size(); ++i) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, wrapper->getArg(0), i);
    args.push_back(b.CreateLoad(ptr, slot));
  }
  b.CreateCall(&kernel, args);
  b.CreateRetVoid();
  kernel.setLinkage(llvm::GlobalValue::InternalLinkage);
}

/// An x86-64 target machine with `features` on top of the baseline, tuned
/// generically, so that the code runs on every CPU with those features.
std::unique_ptr<llvm::TargetMachine>
hostTargetMachine(const std::vector<std::string> &features,
                  std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string featureText;
  for (const std::string &feature : features)
    featureText += (featureText.empty() ? "+" : ",+") + feature;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, "x86-64", featureText, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder passBuilder(&machine);
  passBuilder.registerModuleAnalyses(mam);
  passBuilder.registerCGSCCAnalyses(cgam);
  passBuilder.registerFunctionAnalyses(fam);
  passBuilder.registerLoopAnalyses(lam);
  passBuilder.crossRegisterProxies(lam, fam, cgam, mam);
  passBuilder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2)
      .run(module, mam);
}

/// Links `object` into a shared object with lld; returns its bytes.
FailureOr<std::string> linkShared(ModuleOp anchor, StringRef object) {
  auto lld = llvm::sys::findProgramByName("ld.lld");
  if (!lld)
    lld = llvm::sys::findProgramByName("ld.lld",
                                       {"/usr/lib/llvm-22/bin", "/usr/bin"});
  if (!lld)
    return emitError(anchor.getLoc())
           << "cannot link the CPU kernels: ld.lld was not found";
  llvm::SmallString<128> objectPath, sharedPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("megc-kernels", "o", fd, objectPath))
    return emitError(anchor.getLoc()) << "cannot create a temporary file";
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << object;
  }
  llvm::sys::fs::createTemporaryFile("megc-kernels", "so", sharedPath);
  std::string message;
  llvm::StringRef args[] = {*lld, "-shared", "-o", sharedPath, objectPath};
  int status = llvm::sys::ExecuteAndWait(*lld, args, std::nullopt, {}, 0, 0,
                                         &message);
  llvm::sys::fs::remove(objectPath);
  auto bytes = llvm::MemoryBuffer::getFile(sharedPath);
  llvm::sys::fs::remove(sharedPath);
  if (status != 0 || !bytes)
    return emitError(anchor.getLoc()) << "linking the CPU kernels with " << *lld
                              << " failed: " << message;
  return (*bytes)->getBuffer().str();
}

} // namespace

std::vector<std::string> cpuFeatures(llvm::StringRef cpu) {
  std::vector<std::string> features;
  if (cpu != "native")
    return features;
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  for (const char *feature : megrt::kCheckableCpuFeatures)
    if (host.lookup(feature))
      features.push_back(feature);
  return features;
}

FailureOr<CpuModuleDesc>
compileCpuKernels(ProgramDesc &program,
                  const std::vector<std::string> &features) {
  ModuleOp kernels = program.kernelModule->clone();
  OwningOpRef<ModuleOp> owner(kernels);
  MLIRContext *context = kernels.getContext();

  if (failed(bufferizeKernels(kernels)) ||
      failed(runPipeline(kernels, kToLLVM)))
    return failure();

  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmContext, "megc-kernels");
  if (!module)
    return emitError(kernels.getLoc()) << "translation to LLVM IR failed";
  for (const KernelDesc &kernel : program.kernels) {
    llvm::Function *function = module->getFunction(kernel.name);
    if (!function)
      return emitError(kernels.getLoc()) << "kernel '" << kernel.name
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

  llvm::SmallString<0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager emit;
    if (machine->addPassesToEmitFile(emit, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return emitError(kernels.getLoc()) << "the host target cannot emit objects";
    emit.run(*module);
  }
  FailureOr<std::string> linked = linkShared(kernels, object);
  if (failed(linked))
    return failure();
  return CpuModuleDesc{std::move(*linked), features};
}

} // namespace megc
