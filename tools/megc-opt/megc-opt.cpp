//===- megc-opt.cpp - megc's optimizer driver for lit tests ------------===//
//
// mlir-opt with the meg and megrt dialects and megc's passes registered
// alongside the upstream dialects and passes.
//
//===----------------------------------------------------------------------===//

#include "megc/Conversion/Passes.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"
#include "megc/Dialect/Megrt/Transforms/Passes.h"
#include "megc/Kernels/Passes.h"
#include "megc/Kernels/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::meg::registerMegPasses();
  mlir::meg::registerMegConversionPasses();
  megc::rt::registerMegrtPasses();
  megc::registerKernelPasses();
  megc::registerKernelPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::meg::MegDialect, megc::rt::MegrtDialect>();

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megc optimizer driver\n", registry));
}
