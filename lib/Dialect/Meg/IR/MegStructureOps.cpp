//===- MegStructureOps.cpp - fusion and graph regions ------------------===//
//
// Checks that a region's block arguments match its inputs and that its
// terminator yields values of the result types.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"

using namespace mlir;
using namespace mlir::meg;

/// Checks block arguments against `inputs` and the yield against `results`.
static LogicalResult verifyRegionSignature(Operation *op, Region &body,
                                           ValueRange inputs,
                                           ResultRange results) {
  Block &block = body.front();
  if (block.getNumArguments() != inputs.size())
    return op->emitOpError() << "has " << inputs.size()
                             << " inputs but its body takes "
                             << block.getNumArguments() << " arguments";
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(inputs, block.getArguments()))) {
    auto [input, argument] = pair;
    if (input.getType() != argument.getType())
      return op->emitOpError() << "input " << index << " has type "
                               << input.getType() << " but body argument "
                               << index << " has type " << argument.getType();
  }
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().size() != results.size())
    return yield.emitOpError() << "yields " << yield.getValues().size()
                               << " values but the region has "
                               << results.size() << " results";
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(yield.getValues(), results))) {
    auto [value, result] = pair;
    if (value.getType() != result.getType())
      return yield.emitOpError()
             << "yields " << value.getType() << " for result " << index
             << " of type " << result.getType();
  }
  return success();
}

LogicalResult FusionOp::verifyRegions() {
  return verifyRegionSignature(*this, getBody(), getInputs(), getResults());
}

LogicalResult GraphRegionOp::verifyRegions() {
  if (getName().empty())
    return emitOpError() << "expects a non-empty name";
  return verifyRegionSignature(*this, getBody(), getInputs(), getResults());
}
