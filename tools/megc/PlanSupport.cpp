//===- PlanSupport.cpp - what `megc plan` and its search share ------------===//

#include "PlanSupport.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace megc {

int planFail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "megc plan") << message << "\n";
  return 1;
}

mlir::FailureOr<ProgramDesc> compileProgram(mlir::ModuleOp module,
                                            const CompileOptions &options) {
  if (failed(runFrontEnd(module, options)))
    return mlir::failure();
  mlir::FailureOr<ProgramDesc> program = buildProgram(module, options);
  if (failed(program))
    return mlir::failure();
  for (EntryDesc &entry : program->entries)
    planMemory(entry);
  return program;
}

const EntryDesc *trainStep(const ProgramDesc &program) {
  for (const EntryDesc &entry : program.entries)
    if (entry.name == "train_step")
      return &entry;
  return nullptr;
}

double globalTokens(const ProgramDesc &program, const EntryDesc &entry) {
  const TensorSpec *tokens = nullptr;
  for (const TensorSpec &spec : entry.inputs)
    if (spec.type.getElementType().isInteger() &&
        (!tokens || spec.name == "input_ids"))
      tokens = &spec;
  if (!tokens)
    return 0;
  double count = static_cast<double>(tokens->type.getNumElements());
  if (tokens->split >= 0 && program.mesh &&
      static_cast<size_t>(tokens->split) < program.submeshes.size())
    for (const auto &[axis, size] : program.mesh->axes)
      if (llvm::is_contained(program.submeshes[tokens->split], axis))
        count *= static_cast<double>(size);
  return count;
}

} // namespace megc
