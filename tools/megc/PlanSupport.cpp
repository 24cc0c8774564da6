//===- PlanSupport.cpp - what `megc plan` and its search share ------------===//

#include "PlanSupport.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
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
  if (failed(planMemory(*program)))
    return mlir::failure();
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

llvm::Error writePlanTrace(const plan::Simulation &sim, llvm::StringRef path) {
  using llvm::json::Object;
  // Process 1: the rank's streams (a pipeline's slowest rank); process 0:
  // a pipeline's ranks, one row each.
  llvm::json::Array events;
  auto name = [&](int64_t pid, std::string text) {
    events.push_back(Object{{"name", "process_name"},
                            {"ph", "M"},
                            {"pid", pid},
                            {"args", Object{{"name", std::move(text)}}}});
  };
  name(1, sim.schedule ? "slowest pipeline rank: compute (1) and "
                         "communication (2)"
                       : "compute (1) and communication (2)");
  for (const plan::SimEvent &event : sim.events)
    events.push_back(Object{{"name", event.name},
                            {"cat", plan::costClassName(event.cls)},
                            {"ph", "X"},
                            {"ts", event.start * 1e6},
                            {"dur", (event.end - event.start) * 1e6},
                            {"pid", 1},
                            {"tid", event.comm ? 2 : 1},
                            {"args", Object{{"command", event.command}}}});
  if (sim.schedule && sim.timeline) {
    name(0, "pipeline ranks: the schedule's passes");
    for (llvm::json::Value &event :
         pipeline::scheduleTraceEvents(*sim.schedule, *sim.timeline, 0,
                                       /*microsecondsPerUnit=*/1e6))
      events.push_back(std::move(event));
  }
  std::string error;
  auto output = mlir::openOutputFile(path, &error);
  if (!output)
    return llvm::createStringError(error);
  output->os() << llvm::formatv("{0}", llvm::json::Value(Object{
                                           {"traceEvents", std::move(events)}}))
               << "\n";
  output->keep();
  return llvm::Error::success();
}

} // namespace megc
