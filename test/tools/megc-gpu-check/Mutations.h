//===- Mutations.h - bugs planted in the GPU code, for the check's tests -===//
//
// megc-gpu-check --mutate plants one bug of a kind that a GPU punishes in
// one kernel's GPU code, so that its tests prove the check catches it: a
// barrier deleted, a shared-memory index off by one, a vector access moved
// off its alignment (in the prepared device module), or a grid one block
// short (in the launch table).
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TEST_TOOLS_GPUCHECK_MUTATIONS_H
#define MEGC_TEST_TOOLS_GPUCHECK_MUTATIONS_H

#include "megc/Compiler/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace megc::gpucheck {

struct Mutation {
  enum class Kind { Barrier, SharedIndex, Misalign, Grid } kind;
  std::string kernel;
  /// Which of the kernel's barriers (Barrier).
  unsigned index = 0;
};

/// "barrier:KERNEL[:N]", "shared-index:KERNEL", "misalign:KERNEL" or
/// "grid:KERNEL".
llvm::Expected<Mutation> parseMutation(llvm::StringRef text);

/// Applies `mutation` to the device module (kernel code) or to `codes`
/// (the launch tables) of `program`'s kernels; the error says when the
/// kernel has nothing to mutate.
llvm::Error applyMutation(const Mutation &mutation, const ProgramDesc &program,
                          mlir::ModuleOp device,
                          std::vector<KernelCodeDesc> &codes);

} // namespace megc::gpucheck

#endif // MEGC_TEST_TOOLS_GPUCHECK_MUTATIONS_H
