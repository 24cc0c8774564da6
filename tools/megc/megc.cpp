//===- megc.cpp - the megc compiler driver -----------------------------===//
//
// Entry point of `megc`; dispatches to its subcommands.
//
//===----------------------------------------------------------------------===//

#include "CompileCommand.h"
#include "GenCommand.h"
#include "InspectCommand.h"
#include "PlanCommand.h"
#include "ScheduleCommand.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::SubCommand &gen = megc::genSubCommand();
  llvm::cl::SubCommand &import = megc::importSubCommand();
  llvm::cl::SubCommand &inspect = megc::inspectSubCommand();
  llvm::cl::SubCommand &schedule = megc::scheduleSubCommand();
  llvm::cl::SubCommand &plan = megc::planSubCommand();
  megc::registerCompileOptions();
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "megc: compiles transformer training graphs\n\n"
      "  megc model.mlir -o model.megc       compile a model to an artifact\n"
      "  megc gen <llama|deepseek|mmdit|flux> [options] -o model.mlir\n"
      "  megc import <hf-dir|config.json> --seq N --batch N -o model.mlir\n"
      "  megc inspect model.megc             describe an artifact\n"
      "  megc schedule --pp P --micro-batches M [--pp-schedule S]\n"
      "                                      show a pipeline schedule\n"
      "  megc plan model.mlir --cluster C    simulate the model's step on a\n"
      "                                      cluster\n");
  if (gen || import)
    return megc::runGen();
  if (inspect)
    return megc::runInspect();
  if (schedule)
    return megc::runSchedule();
  if (plan)
    return megc::runPlan();
  if (megc::hasCompileInput())
    return megc::runCompile();
  llvm::WithColor::error(llvm::errs(), "megc")
      << "expected a model file or a subcommand; run 'megc --help'\n";
  return 1;
}
