//===- MegOptimizerOps.cpp - optimizer ops -----------------------------===//
//
// Verification and canonicalization of the AdamW update.
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
  // The precision policy of the module decides what the optimizer consumes
  // and stores (the class of bug where a gradient cast disagreed with the
  // optimizer configuration).
  auto module = (*this)->getParentOfType<ModuleOp>();
  auto policy = module ? module->getAttrOfType<PrecisionAttr>(
                             MegDialect::kPrecisionAttrName)
                       : PrecisionAttr();
  if (!policy)
    return success();
  for (auto [name, value, want] :
       {std::tuple<StringRef, Value, Type>{"parameter", getParam(),
                                           policy.getMainParams()},
        {"gradient", getGrad(), policy.getMainGrads()},
        {"exp_avg", getExpAvg(), policy.getExpAvg()},
        {"exp_avg_sq", getExpAvgSq(), policy.getExpAvgSq()}}) {
    Type element = cast<RankedTensorType>(value.getType()).getElementType();
    // A gradient the update widens exactly as it reads it (see the
    // canonicalizer) is the main_grads value.
    if (element != want &&
        !(value == getGrad() && isExactFloatWidening(element, want))) {
      InFlightDiagnostic diag = emitOpError()
                                << "receives the " << name << " in " << element
                                << " but the precision policy says " << want;
      if (auto ref = getParam().getDefiningOp<ParamRefOp>())
        diag << " (parameter " << ref.getNameAttr() << ")";
      return diag;
    }
  }
  return success();
}

namespace {
/// adamw(p, cast(g : bf16 -> f32), ...) reads g and widens it per element:
/// the same values, without storing the f32 copy of the gradient.
struct FoldGradientWidening : public OpRewritePattern<AdamWOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AdamWOp op,
                                PatternRewriter &rewriter) const override {
    auto widen = op.getGrad().getDefiningOp<CastOp>();
    if (!widen ||
        !isExactFloatWidening(getElementTypeOrSelf(widen.getInput().getType()),
                              getElementTypeOrSelf(widen.getType())))
      return failure();
    rewriter.modifyOpInPlace(
        op, [&] { op.getGradMutable().assign(widen.getInput()); });
    return success();
  }
};
} // namespace

void AdamWOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                          MLIRContext *context) {
  patterns.add<FoldGradientWidening>(context);
}
