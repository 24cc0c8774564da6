//===- HostObject.cpp - LLVM modules to host shared objects ------------===//
//
// The host target machine, LLVM's optimization pipeline and the object
// emission and lld link that CpuCodegen and EmulationCodegen share.
//
//===----------------------------------------------------------------------===//

#include "HostObject.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

namespace megc {

namespace {
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


} // namespace

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

FailureOr<std::string> emitSharedObject(ModuleOp anchor,
                                        llvm::Module &module,
                                        llvm::TargetMachine &machine) {
  llvm::SmallString<0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager emit;
    if (machine.addPassesToEmitFile(emit, os, nullptr,
                                    llvm::CodeGenFileType::ObjectFile))
      return emitError(anchor.getLoc())
             << "the host target cannot emit objects";
    emit.run(module);
  }
  return linkShared(anchor, object);
}

} // namespace megc
