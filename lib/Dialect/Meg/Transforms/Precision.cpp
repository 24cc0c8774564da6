//===- Precision.cpp - the meg-precision pass --------------------------===//
//
// Casts the gradients of the gradient function to the precision policy's
// main_grads dtype, exactly where the dtype changes; a gradient summed over
// a mesh group (a parameter every tensor-parallel rank applies to its part)
// is summed in the policy's grad_reduce dtype.
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

/// `gradient` itself, or, where it is the sum over a mesh group of partial
/// gradients in another dtype than the policy's grad_reduce (the gradient
/// of a parameter each tensor-parallel rank applies to its own part), the
/// same sum taken over the partials cast to grad_reduce.
Value sumInReduceDtype(Value gradient, PrecisionAttr policy) {
  auto sum = gradient.getDefiningOp<AllReduceOp>();
  Type reduceType = policy.getGradReduce();
  if (!sum || sum.getReduce() != CollectiveReduce::sum || !sum->hasOneUse() ||
      getElementTypeOrSelf(gradient.getType()) == reduceType)
    return gradient;
  OpBuilder builder(sum);
  auto type = cast<RankedTensorType>(gradient.getType()).clone(reduceType);
  Value partial = CastOp::create(builder, sum.getLoc(), type, sum.getInput());
  auto wide = AllReduceOp::create(builder, sum.getLoc(), type, partial,
                                  sum.getMeshAttr(), sum.getAxesAttr(),
                                  sum.getReduceAttr());
  sum->dropAllUses();
  sum.erase();
  return wide;
}

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
      ParamOp param = gradientParam(grad, index);
      if (!param)
        continue;
      Type paramType = param.getTensorType().getElementType();
      // Master weights must hold every model weight exactly.
      if (policy.getMainParams() != paramType &&
          !policy.getMainParams().isF32()) {
        mlir::emitError(param.getLoc())
            << "meg-precision: the policy keeps main parameters in "
            << policy.getMainParams() << ", which cannot hold parameter @"
            << param.getSymName() << " (" << paramType
            << ") exactly; use the parameter's dtype or f32";
        return signalPassFailure();
      }
      Value gradient = sumInReduceDtype(operand.get(), policy);
      auto type = cast<RankedTensorType>(gradient.getType());
      if (type.getElementType() != policy.getMainGrads())
        gradient = CastOp::create(builder, ret.getLoc(),
                                  type.clone(policy.getMainGrads()), gradient);
      operand.set(gradient);
    }
    grad.setFunctionType(builder.getFunctionType(grad.getArgumentTypes(),
                                                 ret.getOperandTypes()));
  }
};

} // namespace
