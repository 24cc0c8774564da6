//===- HostObject.h - LLVM modules to host shared objects ------*- C++ -*-===//
//
// What the code generators for the host share: the host target machine,
// LLVM's optimization pipeline, and an LLVM module emitted as an object and
// linked with lld into a shared object that the runtime (or the GPU
// emulator) loads with dlopen.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_COMPILER_HOSTOBJECT_H
#define MEGC_LIB_COMPILER_HOSTOBJECT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <memory>
#include <string>
#include <vector>

namespace megc {

/// An x86-64 target machine with `features` on top of the baseline, tuned
/// generically, so that the code runs on every CPU with those features;
/// null (with `error` set) when the host target is missing.
std::unique_ptr<llvm::TargetMachine>
hostTargetMachine(const std::vector<std::string> &features,
                  std::string &error);

/// Runs LLVM's O3 pipeline for `machine` on `module`.
void optimize(llvm::Module &module, llvm::TargetMachine &machine);

/// Defines `bfloat __truncsfbf2(float)` in `module` (see HostObject.cpp).
void addBf16Truncation(llvm::Module &module);

/// `module` emitted by `machine` as an object and linked by ld.lld into a
/// shared object; its bytes. Errors are reported at `anchor`.
mlir::FailureOr<std::string> emitSharedObject(mlir::ModuleOp anchor,
                                              llvm::Module &module,
                                              llvm::TargetMachine &machine);

} // namespace megc

#endif // MEGC_LIB_COMPILER_HOSTOBJECT_H
