//===- Optimizer.cpp - the meg-optimizer pass --------------------------===//
//
// Turns the gradient function into a training step: AdamW on every
// trainable parameter, with the moments and the step count kept as
// persistent state parameters. With a meg.lr_schedule the learning rate is
// a state scalar the runtime writes before each step; with clip_grad the
// gradients are scaled by the global-norm clipping coefficient inside the
// update, and the step returns the norm as grad_norm. Routing-bias
// updates (meg.expert_bias_update) happen in the step and nowhere else.
//
//===----------------------------------------------------------------------===//

#include "Clipping.h"

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGOPTIMIZER
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

struct MegOptimizerPass
    : public mlir::meg::impl::MegOptimizerBase<MegOptimizerPass> {
  using MegOptimizerBase::MegOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config =
        module->getAttrOfType<AdamWAttr>(MegDialect::kOptimizerAttrName);
    if (!config) {
      module.emitError() << "meg-optimizer: the module has no '"
                         << MegDialect::kOptimizerAttrName
                         << "' attribute (e.g. #meg.adamw<...>)";
      return signalPassFailure();
    }
    auto grad = module.lookupSymbol<func::FuncOp>(gradient);
    if (!grad) {
      module.emitError() << "meg-optimizer: no gradient function @"
                         << gradient << " (run meg-autodiff first)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(name)) {
      grad.emitError() << "meg-optimizer: a symbol @" << name
                       << " exists already";
      return signalPassFailure();
    }
    if (failed(buildStep(module, grad, config)))
      return signalPassFailure();
  }

  /// Declares a state parameter before the functions, zero-initialised
  /// unless `init` says otherwise.
  /// A parameter's moments and master copy are sharded as it is (`sharding`).
  void declareState(OpBuilder &builder, ModuleOp module, StringRef stateName,
                    RankedTensorType type, InitAttr init = {},
                    bool nonNegative = false, ShardingAttr sharding = {},
                    StateOfAttr stateOf = {}) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(*module.getOps<func::FuncOp>().begin());
    if (!init)
      init = InitAttr::get(builder.getContext(), InitKind::zeros, APFloat(0.0));
    auto param = ParamOp::create(
        builder, module.getLoc(), builder.getStringAttr(stateName),
        TypeAttr::get(type), init,
        /*frozen=*/nullptr, builder.getUnitAttr(),
        sharding, /*aliases=*/nullptr, /*parts=*/nullptr);
    if (nonNegative)
      param->setAttr(MegDialect::kNonNegativeAttrName, builder.getUnitAttr());
    if (stateOf)
      param->setAttr(MegDialect::kStateOfAttrName, stateOf);
  }

  /// A function of the gradient's results over `count` micro-batches: its
  /// arguments are the gradient's with dim 0 `count` times larger; each
  /// micro-batch (rows [k b, (k + 1) b)) runs a copy of the gradient's body,
  /// and the loss and the gradients (in their dtypes, the main_grads
  /// policy's) are summed and divided by `count`: the mean over the global
  /// batch for equal micro-batches.
  FailureOr<func::FuncOp> accumulate(OpBuilder &builder, func::FuncOp grad,
                                     int64_t count) {
    Location loc = grad.getLoc();
    bool pipelined = grad->getParentOfType<ModuleOp>()->hasAttr(
        MegDialect::kPipelineAttrName);
    SmallVector<Type> argTypes;
    for (BlockArgument arg : grad.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        return grad.emitError()
               << "meg-optimizer: micro-batches split dim 0 of every input, "
                  "but argument "
               << arg.getArgNumber() << " has type " << arg.getType();
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= count;
      argTypes.push_back(type.clone(shape));
    }
    auto step = func::FuncOp::create(
        builder, loc, grad.getName(),
        builder.getFunctionType(argTypes, grad.getResultTypes()));
    step.setAllArgAttrs(grad.getAllArgAttrs());
    step.setAllResultAttrs(grad.getAllResultAttrs());
    Block *body = step.addEntryBlock();
    OpBuilder inner = OpBuilder::atBlockBegin(body);
    // A global label count is the mean count per micro-batch of the step's
    // labels, so that the mean of the micro-batch losses is the step's sum
    // over its count (PyTorch's ignore_index over the global batch).
    DenseMap<Operation *, Value> stepCounts;
    for (auto labelCount : grad.getBody().getOps<LabelCountOp>()) {
      if (!labelCount.getGlobal())
        continue;
      auto arg = dyn_cast<BlockArgument>(labelCount.getLabels());
      if (!arg || arg.getOwner() != &grad.getBody().front())
        return labelCount.emitError()
               << "meg-optimizer: micro-batches need a global label count "
                  "of an entry input";
      Value all = LabelCountOp::create(
          inner, loc, labelCount.getType(), body->getArgument(arg.getArgNumber()),
          labelCount.getIgnoreIndexAttr(), labelCount.getGlobalAttr());
      stepCounts[labelCount] = DivOp::create(
          inner, loc, all,
          arith::ConstantOp::create(
              inner, loc, labelCount.getType(),
              DenseElementsAttr::get(
                  labelCount.getType(),
                  inner.getF32FloatAttr(static_cast<float>(count)))));
    }
    SmallVector<Value> sums;
    for (int64_t k = 0; k < count; ++k) {
      IRMapping mapping;
      for (auto [from, to] : llvm::zip(grad.getArguments(), body->getArguments())) {
        auto type = cast<RankedTensorType>(from.getType());
        SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
        offsets[0] = k * type.getDimSize(0);
        mapping.map(from, SliceOp::create(inner, loc, to, offsets,
                                          type.getShape(), strides));
      }
      for (Operation &op : grad.getBody().front().without_terminator()) {
        if (Value stepCount = stepCounts.lookup(&op)) {
          mapping.map(op.getResult(0), stepCount);
          continue;
        }
        Operation *copy = inner.clone(op, mapping);
        // A pipeline's schedule runs each micro-batch's passes apart.
        if (pipelined)
          copy->setAttr(MegDialect::kMicroBatchAttrName,
                        inner.getI64IntegerAttr(k));
      }
      auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        Value mapped = mapping.lookupOrDefault(value);
        if (k == 0) {
          sums.push_back(mapped);
          continue;
        }
        // Each sum runs with its micro-batch, so that what that
        // micro-batch made dies there (fusion keeps micro-batches apart).
        auto add = AddOp::create(inner, loc, sums[index], mapped);
        add->setAttr(MegDialect::kMicroBatchAttrName,
                     inner.getI64IntegerAttr(k));
        sums[index] = add;
      }
    }
    SmallVector<Value> means;
    for (Value sum : sums) {
      auto type = cast<RankedTensorType>(sum.getType());
      auto scalar = RankedTensorType::get({}, type.getElementType());
      Value inverse = arith::ConstantOp::create(
          inner, loc, scalar,
          DenseElementsAttr::get(
              scalar, inner.getFloatAttr(type.getElementType(),
                                         1.0 / static_cast<double>(count))));
      means.push_back(MulOp::create(inner, loc, sum, inverse));
    }
    func::ReturnOp::create(inner, loc, means);
    return step;
  }

  /// The training step's routing-bias updates (meg.expert_bias_update):
  /// one per bias, from the load summed over the step's micro-batches (each
  /// micro-batch's copy of the gradient body holds one) and, through
  /// meg.data_sum, over the data-parallel ranks; the new bias
  /// `bias + rate keep sign(mean(L) - L)` is stored before `ret`, `keep`
  /// (1 + `skipped`) being 0 when the step is skipped. Every other function
  /// drops its updates, and the work only they read.
  void expandBiasUpdates(ModuleOp module, func::FuncOp step, Operation *ret,
                         Value skipped, Value one) {
    llvm::MapVector<StringRef, SmallVector<ExpertBiasUpdateOp>> byBias;
    step.walk([&](ExpertBiasUpdateOp update) {
      byBias[update.getBias()].push_back(update);
    });
    OpBuilder builder(ret);
    Value keep;
    if (!byBias.empty())
      keep = AddOp::create(builder, ret->getLoc(), skipped, one);
    for (auto &[bias, updates] : byBias) {
      Location loc = updates.front().getLoc();
      Value load = updates.front().getLoad();
      for (ExpertBiasUpdateOp other : ArrayRef(updates).drop_front())
        load = AddOp::create(builder, loc, load, other.getLoad());
      auto type = cast<RankedTensorType>(load.getType());
      Type f32 = type.getElementType();
      auto scalar = RankedTensorType::get({}, f32);
      auto constant = [&](RankedTensorType of, double value) -> Value {
        return arith::ConstantOp::create(
            builder, loc, of,
            DenseElementsAttr::get(of, builder.getFloatAttr(f32, value)));
      };
      Value total = DataSumOp::create(builder, loc, load);
      // sign(mean - L) = sign(sum(L) - E L): sum(L) - E L is a whole
      // number, so clamping it to [-1, 1] gives the sign exactly.
      Value sum = ReduceOp::create(builder, loc, ReduceKind::sum, total,
                                   ArrayRef<int64_t>{0},
                                   /*keep_dims=*/false);
      Value offset = SubOp::create(
          builder, loc, sum,
          MulOp::create(builder, loc, total,
                        constant(scalar, type.getDimSize(0))));
      Value minusOne = constant(scalar, -1.0);
      Value atMostOne = NegOp::create(
          builder, loc,
          MaxOp::create(builder, loc, NegOp::create(builder, loc, offset),
                        minusOne));
      Value sign = MaxOp::create(builder, loc, atMostOne, minusOne);
      double rate = updates.front().getRate().convertToDouble();
      Value step = MulOp::create(builder, loc, constant(scalar, rate), keep);
      Value biasValue = ParamRefOp::create(builder, loc, type,
                                           FlatSymbolRefAttr::get(
                                               builder.getContext(), bias));
      ParamStoreOp::create(
          builder, loc, bias,
          AddOp::create(builder, loc, biasValue,
                        MulOp::create(builder, loc, sign, step)));
      for (ExpertBiasUpdateOp update : updates)
        update.erase();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func == step)
        continue;
      SmallVector<ExpertBiasUpdateOp> dropped;
      func.walk([&](ExpertBiasUpdateOp update) { dropped.push_back(update); });
      for (ExpertBiasUpdateOp update : dropped) {
        Operation *def = update.getLoad().getDefiningOp();
        update.erase();
        eraseIfDead(def);
      }
    }
  }

  /// Erases `op` and then its operands' definitions while nothing reads
  /// them and they have no side effects.
  static void eraseIfDead(Operation *op) {
    SmallVector<Operation *> worklist = {op};
    while (!worklist.empty()) {
      Operation *next = worklist.pop_back_val();
      if (!next || !isOpTriviallyDead(next))
        continue;
      for (Value operand : next->getOperands())
        worklist.push_back(operand.getDefiningOp());
      next->erase();
    }
  }

  LogicalResult buildStep(ModuleOp module, func::FuncOp grad,
                          AdamWAttr config) {
    OpBuilder builder(module.getContext());
    Location loc = grad.getLoc();
    builder.setInsertionPointAfter(grad);
    int64_t microBatches = 1;
    if (auto attr = module->getAttrOfType<IntegerAttr>(
            MegDialect::kMicroBatchesAttrName))
      microBatches = attr.getInt();
    FailureOr<func::FuncOp> built =
        microBatches == 1 ? cast<func::FuncOp>(builder.clone(*grad))
                          : accumulate(builder, grad, microBatches);
    if (failed(built))
      return failure();
    func::FuncOp step = *built;
    step.setName(name);
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());

    Type f32 = builder.getF32Type();
    auto scalar = RankedTensorType::get({}, f32);
    declareState(builder, module, "optimizer.step", scalar, {},
                 /*nonNegative=*/true);

    builder.setInsertionPoint(ret);
    auto read = [&](StringRef param, RankedTensorType type) -> Value {
      return ParamRefOp::create(builder, loc, type,
                                FlatSymbolRefAttr::get(builder.getContext(),
                                                       param));
    };
    Value one = arith::ConstantOp::create(
        builder, loc, scalar,
        DenseElementsAttr::get(scalar, builder.getFloatAttr(f32, 1.0)));
    Value count = AddOp::create(builder, loc, read("optimizer.step", scalar),
                                one);
    Value stepIndex = CastOp::create(
        builder, loc, RankedTensorType::get({}, builder.getI64Type()), count);

    // The learning rate the runtime computes from the schedule.
    Value lr;
    if (auto schedule = module->getAttrOfType<LrScheduleAttr>(
            MegDialect::kLrScheduleAttrName)) {
      declareState(builder, module, "optimizer.lr", scalar);
      builder.setInsertionPoint(ret);
      lr = read("optimizer.lr", scalar);
      MLIRContext *context = module.getContext();
      module->setAttr(
          MegDialect::kLrScheduleAttrName,
          LrScheduleAttr::get(
              context, schedule.getKind(), schedule.getWarmup(),
              schedule.getDecay(), schedule.getMinLr(), schedule.getInitLr(),
              schedule.getWsdDecay(), schedule.getWsdStyle(),
              FlatSymbolRefAttr::get(context, "optimizer.lr"),
              FlatSymbolRefAttr::get(context, "optimizer.step")));
    }

    // Global-norm clipping: norm = sqrt(sum of every gradient's squares) in
    // f32, scale = min(1, clip / (norm + 1e-6)).
    Value gradNorm, gradScale;
    double clip = config.getClipGrad().convertToDouble();
    if (clip > 0.0) {
      // Gradients of parameters split into blocks (tensor parallelism) are
      // summed over their group; the others are the same on every rank of
      // it and count once.
      Value sum;
      llvm::MapVector<ShardingAttr, Value> blockSums;
      auto addTo = [&](Value &total, Value squares) {
        total = total ? Value(AddOp::create(builder, loc, total, squares))
                      : squares;
      };
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        ParamOp param = gradientParam(step, index);
        if (!param)
          continue;
        Value squares = sumOfSquares(builder, loc, value);
        ShardingAttr sharding = param.getShardingAttr();
        if (sharding && sharding.isBlock()) {
          // One entry per group: the shape and dim do not matter.
          auto group = ShardingAttr::get(builder.getContext(),
                                         sharding.getMesh(),
                                         sharding.getBlockGroup(), {1});
          addTo(blockSums[group], squares);
        } else {
          addTo(sum, squares);
        }
      }
      for (auto &[group, partial] : blockSums) {
        auto one = RankedTensorType::get({1}, f32);
        Value total = AllReduceOp::create(
            builder, loc, one, ReshapeOp::create(builder, loc, one, partial),
            group.getMesh(), group.getAxes(),
            CollectiveReduceAttr::get(builder.getContext(),
                                      CollectiveReduce::sum));
        addTo(sum, ReshapeOp::create(builder, loc, scalar, total));
      }
      if (!sum)
        return grad.emitError()
               << "meg-optimizer: clip_grad needs a gradient to clip";
      gradNorm = SqrtOp::create(builder, loc, sum);
      gradScale = clipScale(builder, loc, gradNorm, clip);
    }

    // A NaN or infinite loss or gradient norm skips every update of the
    // step, and the step count stays (as Megatron skips a step).
    SmallVector<Value> checked = {ret.getOperand(0)};
    if (gradNorm)
      checked.push_back(gradNorm);
    Value nonfinite = CountNonfiniteOp::create(builder, loc, scalar, checked);

    SmallVector<std::pair<std::string, Value>> stores;
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      ParamOp param = gradientParam(step, index);
      if (!param)
        continue;
      StringRef paramName = param.getSymName();
      auto stateOf = [&](StateRole role) {
        return StateOfAttr::get(builder.getContext(), role,
                                FlatSymbolRefAttr::get(param));
      };
      RankedTensorType type = param.getTensorType();
      auto policy = module->getAttrOfType<PrecisionAttr>(
          MegDialect::kPrecisionAttrName);
      auto expAvgType = type.clone(policy ? policy.getExpAvg() : f32);
      auto expAvgSqType = type.clone(policy ? policy.getExpAvgSq() : f32);
      std::string expAvg = ("optimizer.exp_avg." + paramName).str();
      std::string expAvgSq = ("optimizer.exp_avg_sq." + paramName).str();
      ShardingAttr sharding = param.getShardingAttr();
      declareState(builder, module, expAvg, expAvgType, {},
                   /*nonNegative=*/false, sharding,
                   stateOf(StateRole::exp_avg));
      declareState(builder, module, expAvgSq, expAvgSqType, {},
                   /*nonNegative=*/true, sharding,
                   stateOf(StateRole::exp_avg_sq));
      // Separate master weights: the optimizer updates a copy in the
      // policy's main_params dtype, and the model weight is its rounding.
      std::string master = paramName.str();
      RankedTensorType masterType = type;
      if (policy && policy.getMainParams() != type.getElementType()) {
        master = ("optimizer.main_param." + paramName).str();
        masterType = type.clone(policy.getMainParams());
        declareState(builder, module, master, masterType,
                     InitAttr::get(builder.getContext(), InitKind::copy,
                                   APFloat(0.0), FlatSymbolRefAttr::get(param)),
                     /*nonNegative=*/false, sharding,
                     stateOf(StateRole::main_param));
      }
      auto update = AdamWOp::create(
          builder, loc, read(master, masterType), value,
          read(expAvg, expAvgType), read(expAvgSq, expAvgSqType), stepIndex,
          lr, gradScale, nonfinite, config);
      if (master != paramName) {
        stores.push_back({master, update.getNewParam()});
        stores.push_back({paramName.str(),
                          CastOp::create(builder, loc, type,
                                         update.getNewParam())});
      } else {
        stores.push_back({paramName.str(), update.getNewParam()});
      }
      stores.push_back({expAvg, update.getNewExpAvg()});
      stores.push_back({expAvgSq, update.getNewExpAvgSq()});
    }
    // step + 1 + max(-nonfinite, -1): the count advances by 1 when nothing
    // is non-finite, by 0 otherwise.
    Value minusOne = arith::ConstantOp::create(
        builder, loc, scalar,
        DenseElementsAttr::get(scalar, builder.getFloatAttr(f32, -1.0)));
    Value skipped = MaxOp::create(
        builder, loc, NegOp::create(builder, loc, nonfinite), minusOne);
    Value advanced = AddOp::create(builder, loc, count, skipped);
    stores.insert(stores.begin(), {"optimizer.step", advanced});
    for (auto &[param, value] : stores)
      ParamStoreOp::create(builder, loc, param, value);
    expandBiasUpdates(module, step, ret, skipped, one);

    SmallVector<Value> results = {ret.getOperand(0)};
    if (gradNorm)
      results.push_back(gradNorm);
    results.push_back(nonfinite);
    func::ReturnOp::create(builder, loc, results);
    ret.erase();
    step.setFunctionType(builder.getFunctionType(
        step.getArgumentTypes(), ValueRange(results).getTypes()));
    step.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    step.setResultAttr(0, MegDialect::kNameAttrName,
                       builder.getStringAttr("loss"));
    if (gradNorm)
      step.setResultAttr(1, MegDialect::kNameAttrName,
                         builder.getStringAttr("grad_norm"));
    step.setResultAttr(results.size() - 1, MegDialect::kNameAttrName,
                       builder.getStringAttr("nonfinite"));
    return success();
  }
};

} // namespace
