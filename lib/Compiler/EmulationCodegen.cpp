//===- EmulationCodegen.cpp - GPU kernels as a library for the emulator --===//
//
// The prepared device module (the kernels as the NVVM conversion receives
// them) lowered by meg-lower-gpu-emulation to host code, wrapped as the GPU
// emulator's interface asks (runtime/emulator/include/megemu/Abi.h: an
// entry per kernel, the hook table, the manifest) and linked into a shared
// object. Tests run megc's CUDA kernels on it without a GPU.
//
//===----------------------------------------------------------------------===//

#include "HostObject.h"
#include "megc/Compiler/CompilePipeline.h"
#include "megc/Compiler/Program.h"
#include "megc/Kernels/Passes.h"
#include "megc/Kernels/Pipelines.h"

#include "megemu/Abi.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace megc {

namespace {

struct EmulatedKernel {
  std::string name;
  int64_t args;
  llvm::json::Array extents, workgroup;
};

/// Adds `void <kernel>_emu(void **args)`, which calls the kernel with its
/// arguments and workgroup buffers read from `args`.
LogicalResult addEntry(ModuleOp anchor, llvm::Module &module,
                       const EmulatedKernel &kernel) {
  llvm::Function *function = module.getFunction(kernel.name);
  if (!function)
    return emitError(anchor.getLoc())
           << "emulation: kernel '" << kernel.name << "' is missing after "
           << "lowering";
  llvm::LLVMContext &context = module.getContext();
  auto *ptr = llvm::PointerType::getUnqual(context);
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr},
                                       false);
  auto *entry = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                       kernel.name + megemu::kEntrySuffix,
                                       module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", entry));
  llvm::SmallVector<llvm::Value *> args;
  for (unsigned i = 0; i < function->arg_size(); ++i) {
    if (!function->getArg(i)->getType()->isPointerTy())
      return emitError(anchor.getLoc())
             << "emulation: kernel '" << kernel.name << "' argument " << i
             << " is not a pointer after lowering";
    args.push_back(
        b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, entry->getArg(0), i)));
  }
  b.CreateCall(function, args);
  b.CreateRetVoid();
  function->setLinkage(llvm::GlobalValue::InternalLinkage);
  return success();
}

/// Turns each hook declaration into a call through the exported table
/// `megemu_hooks`, which the emulator fills when it loads the library: the
/// library has no undefined symbols of the emulator's.
void bindHooks(llvm::Module &module) {
  llvm::LLVMContext &context = module.getContext();
  auto *ptr = llvm::PointerType::getUnqual(context);
  auto *tableType = llvm::ArrayType::get(ptr, megemu::kHookCount);
  auto *table = new llvm::GlobalVariable(
      module, tableType, /*isConstant=*/false,
      llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantAggregateZero::get(tableType), megemu::kHooksSymbol);
  for (int hook = 0; hook < megemu::kHookCount; ++hook) {
    llvm::Function *declaration = module.getFunction(megemu::kHookNames[hook]);
    if (!declaration || !declaration->isDeclaration())
      continue;
    declaration->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(
        llvm::BasicBlock::Create(context, "entry", declaration));
    llvm::Value *slot = b.CreateConstInBoundsGEP2_32(tableType, table, 0, hook);
    llvm::Value *target = b.CreateLoad(ptr, slot);
    llvm::SmallVector<llvm::Value *> args;
    for (llvm::Argument &arg : declaration->args())
      args.push_back(&arg);
    llvm::CallInst *call =
        b.CreateCall(declaration->getFunctionType(), target, args);
    if (declaration->getReturnType()->isVoidTy())
      b.CreateRetVoid();
    else
      b.CreateRet(call);
  }
}

void addManifest(llvm::Module &module, llvm::json::Value manifest) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << manifest;
  llvm::Constant *data =
      llvm::ConstantDataArray::getString(module.getContext(), text);
  new llvm::GlobalVariable(module, data->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, data,
                           megemu::kManifestSymbol);
}

} // namespace

FailureOr<std::string> compileCudaEmulation(ModuleOp device) {
  ModuleOp module = device.clone();
  OwningOpRef<ModuleOp> owner(module);
  OpPassManager lowering(ModuleOp::getOperationName());
  lowering.addPass(createMegGpuToHostEmulation());
  if (failed(runPipeline(module, lowering)))
    return failure();
  std::vector<EmulatedKernel> kernels;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto args = func->getAttrOfType<IntegerAttr>("megemu.args");
    if (!args)
      continue;
    EmulatedKernel kernel{func.getName().str(), args.getInt(), {}, {}};
    for (Attribute extent :
         func->getAttrOfType<ArrayAttr>("megemu.extents"))
      kernel.extents.push_back(cast<IntegerAttr>(extent).getInt());
    for (Attribute buffer :
         func->getAttrOfType<ArrayAttr>("megemu.workgroup")) {
      auto pair = cast<ArrayAttr>(buffer);
      kernel.workgroup.push_back(llvm::json::Object{
          {"bytes", cast<IntegerAttr>(pair[0]).getInt()},
          {"align", cast<IntegerAttr>(pair[1]).getInt()}});
    }
    kernels.push_back(std::move(kernel));
  }
  llvm::json::Array sites;
  if (auto siteAttr = module->getAttrOfType<ArrayAttr>("megemu.sites"))
    for (Attribute site : siteAttr)
      sites.push_back(cast<StringAttr>(site).getValue().str());

  // The rest of the lowering (the pass ran above, alone, so that the
  // kernels' attributes could be read first).
  OpPassManager host(ModuleOp::getOperationName());
  buildGpuEmulationPipeline(host);
  if (failed(runPipeline(module, host)))
    return failure();
  MLIRContext *context = module.getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "megc-emulated-kernels");
  if (!llvmModule)
    return emitError(module.getLoc()) << "translation to LLVM IR failed";

  llvm::json::Array manifestKernels;
  for (EmulatedKernel &kernel : kernels) {
    if (failed(addEntry(module, *llvmModule, kernel)))
      return failure();
    manifestKernels.push_back(llvm::json::Object{
        {"name", kernel.name},
        {"args", kernel.args},
        {"extents", std::move(kernel.extents)},
        {"workgroup", std::move(kernel.workgroup)}});
  }
  bindHooks(*llvmModule);
  addManifest(*llvmModule, llvm::json::Object{
                               {"abi", megemu::kAbiVersion},
                               {"kernels", std::move(manifestKernels)},
                               {"sites", std::move(sites)}});

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine({}, error);
  if (!machine)
    return emitError(module.getLoc()) << "no host target: " << error;
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  optimize(*llvmModule, *machine);
  addBf16Truncation(*llvmModule);
  return emitSharedObject(module, *llvmModule, *machine);
}

} // namespace megc
