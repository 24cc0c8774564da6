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

/// Defines `bfloat __truncsfbf2(float)`, rounding to nearest even (NaN to the
/// quiet NaN 0x7fc0) on the bits. Code generation legalizes some bf16
/// operations (a select of bf16 values, which the optimizer forms from the
/// kernels' integer rounding) by widening to f32 and calling it, and neither
/// libgcc 12 nor compiler-rt 14 provides it. Added after optimization, so
/// that nothing folds it back into a bf16 operation.
void addBf16Truncation(llvm::Module &module) {
  llvm::LLVMContext &context = module.getContext();
  auto *i32 = llvm::Type::getInt32Ty(context);
  auto *type =
      llvm::FunctionType::get(llvm::Type::getBFloatTy(context),
                              {llvm::Type::getFloatTy(context)}, false);
  auto *function = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage, "__truncsfbf2", module);
  function->setVisibility(llvm::GlobalValue::HiddenVisibility);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", function));
  llvm::Value *bits = b.CreateBitCast(function->getArg(0), i32);
  llvm::Value *odd = b.CreateAnd(b.CreateLShr(bits, 16), 1);
  llvm::Value *rounded =
      b.CreateAdd(bits, b.CreateAdd(odd, b.getInt32(0x7fff)));
  llvm::Value *isNan =
      b.CreateICmpUGT(b.CreateAnd(bits, 0x7fffffff), b.getInt32(0x7f800000));
  llvm::Value *chosen = b.CreateSelect(isNan, b.getInt32(0x7fc00000), rounded);
  llvm::Value *high = b.CreateTrunc(b.CreateLShr(chosen, 16), b.getInt16Ty());
  b.CreateRet(b.CreateBitCast(high, llvm::Type::getBFloatTy(context)));
}

/// An x86-64 target machine with `features` on top of the baseline, tuned
/// generically, so that the code runs on every CPU with those features.
std::unique_ptr<llvm::TargetMachine>
hostTargetMachine(const std::vector<std::string> &features,
                  std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
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
  passBuilder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3)
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
  int status =
      llvm::sys::ExecuteAndWait(*lld, args, std::nullopt, {}, 0, 0, &message);
  llvm::sys::fs::remove(objectPath);
  auto bytes = llvm::MemoryBuffer::getFile(sharedPath);
  llvm::sys::fs::remove(sharedPath);
  if (status != 0 || !bytes)
    return emitError(anchor.getLoc())
           << "linking the CPU kernels with " << *lld << " failed: " << message;
  return (*bytes)->getBuffer().str();
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

  llvm::SmallString<0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager emit;
    if (machine->addPassesToEmitFile(emit, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return emitError(kernels.getLoc())
             << "the host target cannot emit objects";
    emit.run(*module);
  }
  FailureOr<std::string> linked = linkShared(kernels, object);
  if (failed(linked))
    return failure();
  return CpuModuleDesc{std::move(*linked), features, std::move(*codes),
                       std::move(llvmIr)};
}

} // namespace megc
