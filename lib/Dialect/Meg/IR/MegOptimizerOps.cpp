//===- MegOptimizerOps.cpp - optimizer ops -----------------------------===//
//
// Verification of the AdamW update.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

using namespace mlir;
using namespace mlir::meg;

LogicalResult AdamWOp::verify() {
  auto param = cast<RankedTensorType>(getParam().getType());
  for (auto [name, value] : {std::pair<StringRef, Value>{"grad", getGrad()},
                             {"exp_avg", getExpAvg()},
                             {"exp_avg_sq", getExpAvgSq()}}) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getShape() != param.getShape())
      return emitOpError() << "expects " << name << " of the parameter's shape "
                           << formatShape(param.getShape()) << ", got "
                           << formatShape(type.getShape());
  }
  return success();
}
