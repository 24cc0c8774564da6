//===- Precision.cpp - the meg-precision pass --------------------------===//
//
// Casts the gradients of the gradient function to the precision policy's
// main_grads dtype, exactly where the dtype changes.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGPRECISION
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

struct MegPrecisionPass
    : public mlir::meg::impl::MegPrecisionBase<MegPrecisionPass> {
  using MegPrecisionBase::MegPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto policy =
        module->getAttrOfType<PrecisionAttr>(MegDialect::kPrecisionAttrName);
    if (!policy)
      return;
    auto grad = module.lookupSymbol<func::FuncOp>(gradient);
    if (!grad) {
      module.emitError() << "meg-precision: no gradient function @"
                         << gradient << " (run meg-autodiff first)";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    OpBuilder builder(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned index = operand.getOperandNumber();
      auto name = grad.getResultAttrOfType<StringAttr>(
          index, MegDialect::kNameAttrName);
      if (!name || !name.getValue().starts_with("grad."))
        continue;
      StringRef paramName = name.getValue().drop_front(5);
      auto param = module.lookupSymbol<ParamOp>(paramName);
      if (!param)
        continue;
      Type paramType = param.getTensorType().getElementType();
      // Master weights must hold every model weight exactly.
      if (policy.getMainParams() != paramType &&
          !policy.getMainParams().isF32()) {
        mlir::emitError(param.getLoc())
            << "meg-precision: the policy keeps main parameters in "
            << policy.getMainParams() << ", which cannot hold parameter @"
            << paramName << " (" << paramType
            << ") exactly; use the parameter's dtype or f32";
        return signalPassFailure();
      }
      auto type = cast<RankedTensorType>(operand.get().getType());
      if (type.getElementType() == policy.getMainGrads())
        continue;
      operand.set(CastOp::create(builder, ret.getLoc(),
                                 type.clone(policy.getMainGrads()),
                                 operand.get()));
    }
    grad.setFunctionType(builder.getFunctionType(grad.getArgumentTypes(),
                                                 ret.getOperandTypes()));
  }
};

} // namespace
