//===- Autodiff.cpp - the meg-autodiff pass ----------------------------===//
//
// Builds the gradient function of a scalar loss by walking the loss
// function backwards and asking each op for its vector-Jacobian product.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGAUTODIFF
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// Gradients accumulated per value (and per parameter symbol).
/// The ops a builder creates, in order.
struct CreatedOps : public OpBuilder::Listener {
  SmallVector<Operation *> ops;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
};

class GradientMap {
public:
  explicit GradientMap(OpBuilder &builder) : builder(builder) {}

  Value lookup(Value value) const { return grads.lookup(value); }

  void add(Value value, Value grad, Location loc) {
    Value &slot = grads[value];
    slot = slot ? AddOp::create(builder, loc, slot, grad).getResult() : grad;
  }

  void addParam(StringRef name, Value grad, Location loc) {
    Value &slot = params[name];
    slot = slot ? AddOp::create(builder, loc, slot, grad).getResult() : grad;
  }

  Value param(StringRef name) const { return params.lookup(name); }

private:
  OpBuilder &builder;
  llvm::DenseMap<Value, Value> grads;
  llvm::MapVector<StringRef, Value> params;
};

struct MegAutodiffPass
    : public mlir::meg::impl::MegAutodiffBase<MegAutodiffPass> {
  using MegAutodiffBase::MegAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto loss = module.lookupSymbol<func::FuncOp>(function);
    if (!loss) {
      module.emitError() << "meg-autodiff: no function @" << function
                         << " to differentiate";
      return signalPassFailure();
    }
    if (module.lookupSymbol(name)) {
      loss.emitError() << "meg-autodiff: a symbol @" << name
                       << " exists already";
      return signalPassFailure();
    }
    auto resultType =
        loss.getNumResults() == 1
            ? dyn_cast<RankedTensorType>(loss.getResultTypes()[0])
            : RankedTensorType();
    if (!resultType || resultType.getRank() != 0 ||
        !isa<FloatType>(resultType.getElementType())) {
      loss.emitError() << "meg-autodiff: @" << function
                       << " must return one floating-point scalar tensor";
      return signalPassFailure();
    }
    if (failed(buildGradient(module, loss)))
      return signalPassFailure();
    // A copy_to_group means only its gradient's all-reduce, now built: every
    // one in the module (the forward entry's too) becomes its input.
    module.walk([](CopyToGroupOp copy) {
      copy.getResult().replaceAllUsesWith(copy.getInput());
      copy.erase();
    });
  }

  LogicalResult buildGradient(ModuleOp module, func::FuncOp loss) {
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(loss);
    auto grad = cast<func::FuncOp>(builder.clone(*loss));
    grad.setName(name);
    Block &body = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value lossValue = ret.getOperand(0);
    Location loc = ret.getLoc();

    builder.setInsertionPoint(ret);
    GradientMap grads(builder);
    auto lossType = cast<RankedTensorType>(lossValue.getType());
    grads.add(lossValue,
              arith::ConstantOp::create(
                  builder, loc, lossType,
                  DenseElementsAttr::get(
                      lossType, builder.getFloatAttr(lossType.getElementType(),
                                                     1.0))),
              loc);

    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    // Under a pipeline, every op built here is part of the backward pass
    // and runs on the stage of the forward op it differentiates.
    bool pipelined = module->hasAttr(MegDialect::kPipelineAttrName);
    CreatedOps created;
    if (pipelined)
      builder.setListener(&created);
    auto stampCreated = [&](Operation *forward) {
      Attribute stage = forward->getAttr(MegDialect::kStageAttrName);
      for (Operation *op : created.ops) {
        op->setAttr(MegDialect::kBackwardAttrName, builder.getUnitAttr());
        if (stage)
          op->setAttr(MegDialect::kStageAttrName, stage);
      }
      created.ops.clear();
    };
    auto restoreListener =
        llvm::make_scope_exit([&] { builder.setListener(nullptr); });
    Operation *previous = nullptr;
    for (Operation *op : llvm::reverse(ops)) {
      // What the previous op's gradient built (also when it ended early).
      if (pipelined && previous)
        stampCreated(previous);
      previous = op;
      SmallVector<Value> resultGrads;
      bool reached = false;
      for (Value result : op->getResults()) {
        resultGrads.push_back(grads.lookup(result));
        reached |= static_cast<bool>(resultGrads.back());
      }
      if (!reached)
        continue;
      if (auto ref = dyn_cast<ParamRefOp>(op)) {
        grads.addParam(ref.getName(), resultGrads[0], op->getLoc());
        continue;
      }
      // Nothing to propagate to (iota, constants).
      if (llvm::none_of(op->getOperands(), isFloatTensor))
        continue;
      if (isa<func::CallOp>(op))
        return op->emitError() << "meg-autodiff: inline calls before "
                                  "differentiating";
      auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
      if (!differentiable)
        return op->emitError()
               << "meg-autodiff: '" << op->getName()
               << "' has no vector-Jacobian product but lies on the path "
                  "to the loss";
      FailureOr<SmallVector<Value>> operandGrads =
          differentiable.buildVJP(builder, resultGrads);
      if (failed(operandGrads))
        return failure();
      for (auto [operand, operandGrad] :
           llvm::zip(op->getOperands(), *operandGrads))
        if (operandGrad && isFloatTensor(operand))
          grads.add(operand, operandGrad, op->getLoc());
    }
    if (pipelined && previous)
      stampCreated(previous);
    restoreListener.release();
    builder.setListener(nullptr);

    SmallVector<Value> results = {lossValue};
    SmallVector<std::string> names = {"loss"};
    SmallVector<ParamOp> gradOf = {ParamOp()};
    for (ParamOp param : module.getOps<ParamOp>()) {
      if (!param.isTrainable())
        continue;
      Value paramGrad = grads.param(param.getSymName());
      if (!paramGrad) // the loss does not depend on it
        paramGrad = arith::ConstantOp::create(
            builder, loc, param.getTensorType(),
            DenseElementsAttr::get(param.getTensorType(),
                                   builder.getZeroAttr(
                                       param.getTensorType().getElementType())));
      results.push_back(paramGrad);
      names.push_back(("grad." + param.getSymName()).str());
      gradOf.push_back(param);
    }
    func::ReturnOp::create(builder, loc, results);
    ret.erase();
    grad.setFunctionType(builder.getFunctionType(
        grad.getArgumentTypes(), ValueRange(results).getTypes()));
    grad.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    for (auto [index, resultName] : llvm::enumerate(names)) {
      grad.setResultAttr(index, MegDialect::kNameAttrName,
                         builder.getStringAttr(resultName));
      if (gradOf[index])
        setGradientParam(grad, index, gradOf[index]);
    }
    return success();
  }
};

} // namespace
