//===- TensorParallel.cpp - the meg-tensor-parallel pass -----------------===//
//
// Lays a model written for one device out over the tensor-parallel group
// of its `meg.tensor_parallel` (Megatron's layout): the layers that record
// a #meg.tp_layer split their parameters, the splits follow the data
// through every function, and collectives complete them where an op needs
// a split dimension whole.
//
// The rules of the ops are theirs (TensorParallelOpInterface,
// lib/Dialect/Meg/IR/TensorParallelRules.cpp); this pass plans the
// parameters' splits, propagates the layouts and provides the collectives
// the rules build with (TensorParallelRewriter).
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "GroupRewrites.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGTENSORPARALLEL
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

using Layout = TpLayout;

/// What a layer's split makes of a parameter.
struct ParamSplit {
  Layout::Kind kind; // Split (a block per rank) or GroupBlock (kept whole)
  int64_t dim;
  int64_t parts;
  Operation *layer; // the layer that decided it
};

/// `type` with dimension `layout.dim` cut into `layout.parts`.
RankedTensorType localType(Type type, const Layout &layout) {
  auto tensor = cast<RankedTensorType>(type);
  if (layout.isWhole())
    return tensor;
  SmallVector<int64_t> shape(tensor.getShape());
  shape[layout.dim] /= layout.parts;
  return tensor.clone(shape);
}

/// The propagation: every value's layout, the parameters' splits, and the
/// services the ops' rules (TensorParallelOpInterface) build with.
class TensorParallelLayout : public TensorParallelRewriter {
public:
  TensorParallelLayout(ModuleOp module, TensorParallelAttr config,
                       int64_t ranks)
      : module(module), config(config), numRanks(ranks),
        builder(module.getContext()) {
    builder.setListener(&tagger);
  }

  LogicalResult planParams();
  void splitParams();
  LogicalResult layOut(func::FuncOp func);
  /// Values gathered whole because an op needed them so.
  int64_t numGathered = 0;

  // TensorParallelRewriter.
  int64_t ranks() const override { return numRanks; }
  bool sequenceParallel() const override {
    return config.getSequenceParallel();
  }
  Layout layoutOf(Value value) const override {
    auto it = layouts.find(value);
    return it == layouts.end() ? Layout() : it->second;
  }
  SmallVector<int64_t> wholeShape(Value value) const override;
  void splitResult(Value value, const Layout &layout) override {
    if (layout.isWhole())
      return;
    layouts[value] = layout;
    value.setType(localType(value.getType(), layout));
  }
  void setLayout(Value value, const Layout &layout) override {
    layouts[value] = layout;
  }
  std::optional<Layout> paramSplitOf(Value weight) const override;
  void markTrainable(Value value) override { trainable.insert(value); }
  void markTrainableLike(Value result, Value source) override {
    if (trainable.contains(source))
      trainable.insert(result);
  }
  OpBuilder &buildAt(Operation *anchor) override;
  OpBuilder &buildAfter(Operation *anchor) override;
  Value enter(Value value) override;
  FailureOr<Value> gathered(Value value, Operation *user) override;
  Value sliced(Value value, int64_t dim) override;
  LogicalResult makeWhole(Operation *op) override;
  Value allReduce(Value value, CollectiveReduce reduce) override;
  Value reduceScatterAlong(Value partial, int64_t dim) override;
  Value firstOfBlock(int64_t blockSize) override;
  Value groupBlock(Value whole, int64_t groups) override;
  InFlightDiagnostic error(Operation *op) override {
    return op->emitError() << "meg-tensor-parallel: ";
  }

private:
  FlatSymbolRefAttr mesh() const { return config.getMesh(); }
  ArrayAttr axes() const { return config.getAxes(); }
  /// The builder right after `value`'s definition.
  void buildAfterValue(Value value);
  Value gatherAlong(Value shard, int64_t dim);
  /// `build()` once per `key`, right after `value`'s definition, depending
  /// on trainable parameters as `value` does; `cache` holds the results.
  template <typename Key>
  Value onceAfter(DenseMap<Key, Value> &cache, Key key, Value value,
                  function_ref<Value()> build);

  /// Gives each result of `op` its layout: a parameter's split, the one
  /// rule of Elementwise ops, the op's own rule, or whole values.
  LogicalResult visit(Operation *op);
  LogicalResult visitParamRef(ParamRefOp ref);

  ModuleOp module;
  TensorParallelAttr config;
  int64_t numRanks;
  OpBuilder builder;
  LayerTagger tagger;
  llvm::StringMap<ParamSplit> paramSplits;
  // Per function.
  DenseMap<Value, Layout> layouts;
  DenseSet<Value> trainable;
  DenseMap<Value, Value> entered, wholes;
  DenseMap<std::pair<Value, int64_t>, Value> blocks;
};

OpBuilder &TensorParallelLayout::buildAt(Operation *anchor) {
  tagger.at(builder, anchor);
  return builder;
}

OpBuilder &TensorParallelLayout::buildAfter(Operation *anchor) {
  tagger.after(builder, anchor);
  return builder;
}

void TensorParallelLayout::buildAfterValue(Value value) {
  tagger.afterValue(builder, value);
}

Value TensorParallelLayout::allReduce(Value value, CollectiveReduce reduce) {
  return AllReduceOp::create(
      builder, value.getLoc(), value.getType(), value, mesh(), axes(),
      CollectiveReduceAttr::get(builder.getContext(), reduce));
}

Value TensorParallelLayout::gatherAlong(Value shard, int64_t dim) {
  return alongDim(
      builder, shard, dim, numRanks, 1, [&](Value moved, Type type) {
        return AllGatherOp::create(builder, shard.getLoc(), type, moved, mesh(),
                                   axes(), builder.getI64IntegerAttr(0));
      });
}

Value TensorParallelLayout::reduceScatterAlong(Value partial, int64_t dim) {
  return alongDim(builder, partial, dim, 1, numRanks,
                  [&](Value moved, Type type) {
                    return ReduceScatterOp::create(
                        builder, partial.getLoc(), type, moved, mesh(), axes(),
                        builder.getI64IntegerAttr(0),
                        CollectiveReduceAttr::get(builder.getContext(),
                                                  CollectiveReduce::sum));
                  });
}

Value TensorParallelLayout::firstOfBlock(int64_t blockSize) {
  Location loc = builder.getInsertionPoint()->getLoc();
  auto starts = RankedTensorType::get({numRanks}, builder.getI32Type());
  SmallVector<int32_t> values;
  for (int64_t r = 0; r < numRanks; ++r)
    values.push_back(static_cast<int32_t>(r * blockSize));
  Value table = arith::ConstantOp::create(
      builder, loc, starts,
      DenseElementsAttr::get(starts, ArrayRef<int32_t>(values)));
  Value mine = ShardSliceOp::create(
      builder, loc, RankedTensorType::get({1}, builder.getI32Type()), table,
      mesh(), axes(), builder.getI64IntegerAttr(0));
  return ReshapeOp::create(
      builder, loc, RankedTensorType::get({}, builder.getI32Type()), mine);
}

Value TensorParallelLayout::groupBlock(Value whole, int64_t groups) {
  auto type = cast<RankedTensorType>(whole.getType());
  SmallVector<int64_t> shape(type.getShape());
  int64_t elements = type.getNumElements() / groups;
  Location loc = whole.getLoc();
  auto tensor = [&](ArrayRef<int64_t> dims) { return type.clone(dims); };
  // One copy of a group's block per rank of the group, then this rank's.
  Value grouped =
      ReshapeOp::create(builder, loc, tensor({groups, 1, elements}), whole);
  Value copies = BroadcastOp::create(
      builder, loc, tensor({groups, numRanks / groups, elements}), grouped);
  Value perRank =
      ReshapeOp::create(builder, loc, tensor({numRanks, elements}), copies);
  Value mine =
      ShardSliceOp::create(builder, loc, tensor({1, elements}), perRank, mesh(),
                           axes(), builder.getI64IntegerAttr(0));
  shape[0] /= groups;
  return ReshapeOp::create(builder, loc, tensor(shape), mine);
}

template <typename Key>
Value TensorParallelLayout::onceAfter(DenseMap<Key, Value> &cache, Key key,
                                      Value value,
                                      function_ref<Value()> build) {
  if (Value known = cache.lookup(key))
    return known;
  OpBuilder::InsertionGuard guard(builder);
  Attribute layer = tagger.layer;
  buildAfterValue(value);
  Value built = build();
  tagger.layer = layer;
  markTrainableLike(built, value);
  cache[key] = built;
  return built;
}

Value TensorParallelLayout::enter(Value value) {
  if (!trainable.contains(value))
    return value;
  return onceAfter(entered, value, value, [&]() -> Value {
    return CopyToGroupOp::create(builder, value.getLoc(), value, mesh(),
                                 axes());
  });
}

FailureOr<Value> TensorParallelLayout::gathered(Value value, Operation *user) {
  Layout layout = layoutOf(value);
  if (layout.isWhole())
    return value;
  if (layout.kind == Layout::GroupBlock) {
    InFlightDiagnostic diag =
        error(user) << "needs a value whole that is the block of one of "
                    << layout.parts << " groups along dim " << layout.dim
                    << ", which ranks share: only an attention can use it";
    diag.attachNote(value.getLoc()) << "the group's block";
    return failure();
  }
  return onceAfter(wholes, value, value, [&] {
    ++numGathered;
    return gatherAlong(value, layout.dim);
  });
}

Value TensorParallelLayout::sliced(Value value, int64_t dim) {
  Value block = onceAfter(blocks, {value, dim}, value, [&] {
    return alongDim(builder, value, dim, 1, numRanks,
                    [&](Value moved, Type type) -> Value {
                      return ShardSliceOp::create(builder, value.getLoc(), type,
                                                  moved, mesh(), axes(),
                                                  builder.getI64IntegerAttr(0));
                    });
  });
  layouts[block] = Layout::make(Layout::Split, dim, numRanks);
  return block;
}

LogicalResult TensorParallelLayout::makeWhole(Operation *op) {
  for (OpOperand &operand : op->getOpOperands()) {
    FailureOr<Value> whole = gathered(operand.get(), op);
    if (failed(whole))
      return failure();
    operand.set(*whole);
  }
  return success();
}

SmallVector<int64_t> TensorParallelLayout::wholeShape(Value value) const {
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(value.getType()).getShape());
  Layout layout = layoutOf(value);
  if (!layout.isWhole())
    shape[layout.dim] *= layout.parts;
  return shape;
}

std::optional<Layout> TensorParallelLayout::paramSplitOf(Value weight) const {
  auto ref = weight.getDefiningOp<ParamRefOp>();
  if (!ref)
    return std::nullopt;
  auto it = paramSplits.find(ref.getName());
  if (it == paramSplits.end())
    return std::nullopt;
  return Layout::make(it->second.kind, it->second.dim, it->second.parts);
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

LogicalResult TensorParallelLayout::planParams() {
  auto decide = [&](Operation *layer, Value operand, StringRef role,
                    ParamSplit split) -> LogicalResult {
    auto ref = operand.getDefiningOp<ParamRefOp>();
    if (!ref)
      return layer->emitError()
             << "meg-tensor-parallel: the " << role
             << " of a tensor-parallel layer must be a meg.param_ref";
    StringRef name = ref.getName();
    auto param = module.lookupSymbol<ParamOp>(name);
    if (param.getSharding())
      return layer->emitError() << "meg-tensor-parallel: parameter @" << name
                                << " is sharded already";
    int64_t extent = param.getTensorType().getDimSize(split.dim);
    if (split.kind == Layout::Split && extent % split.parts != 0)
      return layer->emitError()
             << "meg-tensor-parallel: parameter @" << name << " splits dim "
             << split.dim << " of " << extent << " into " << split.parts
             << " blocks, which do not divide it";
    auto [it, inserted] = paramSplits.try_emplace(name, split);
    ParamSplit &known = it->second;
    if (!inserted && (known.kind != split.kind || known.dim != split.dim ||
                      known.parts != split.parts)) {
      InFlightDiagnostic diag = layer->emitError()
                                << "meg-tensor-parallel: parameter @" << name
                                << " is split another way by a second layer";
      diag.attachNote(known.layer->getLoc()) << "the first layer";
      return diag;
    }
    return success();
  };

  WalkResult result =
      module.walk([&](Operation *op) {
        auto layer =
            op->getAttrOfType<TpLayerAttr>(MegDialect::kTpLayerAttrName);
        if (!layer)
          return WalkResult::advance();
        if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
          if (embedding.getFirstRow()) {
            embedding.emitError() << "meg-tensor-parallel: a vocab-parallel "
                                     "embedding reads the whole table";
            return WalkResult::interrupt();
          }
          return failed(decide(op, embedding.getTable(), "table",
                               {Layout::Split, 0, numRanks, op}))
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        }
        auto linear = cast<LinearOp>(op);
        if (layer.getKind() == TpLayerKind::row) {
          return failed(decide(op, linear.getWeight(), "weight",
                               {Layout::Split, 1, numRanks, op}))
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        }
        int64_t out =
            cast<RankedTensorType>(linear.getWeight().getType()).getDimSize(0);
        int64_t groups = layer.getGroups();
        ParamSplit split = {Layout::Split, 0, numRanks, op};
        if (groups && out % groups != 0) {
          linear.emitError()
              << "meg-tensor-parallel: " << groups
              << " groups do not divide the " << out << " output features";
          return WalkResult::interrupt();
        }
        if (groups && groups % numRanks != 0) {
          if (numRanks % groups != 0) {
            linear.emitError()
                << "meg-tensor-parallel: a column-parallel layer splits its "
                << groups << " groups of output features over " << numRanks
                << " ranks, but neither divides the other";
            return WalkResult::interrupt();
          }
          split = {Layout::GroupBlock, 0, groups, op};
        }
        if (failed(decide(op, linear.getWeight(), "weight", split)) ||
            (linear.getBias() &&
             failed(decide(op, linear.getBias(), "bias", split))))
          return WalkResult::interrupt();
        return WalkResult::advance();
      });
  return failure(result.wasInterrupted());
}

void TensorParallelLayout::splitParams() {
  for (auto param : module.getOps<ParamOp>()) {
    auto it = paramSplits.find(param.getSymName());
    if (it == paramSplits.end() || it->second.kind != Layout::Split)
      continue;
    const ParamSplit &split = it->second;
    RankedTensorType whole = param.getTensorType();
    param.setType(
        localType(whole, Layout::make(split.kind, split.dim, split.parts)));
    param.setShardingAttr(ShardingAttr::get(module.getContext(), mesh(), axes(),
                                            whole.getShape(), split.dim));
  }
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

LogicalResult TensorParallelLayout::visitParamRef(ParamRefOp ref) {
  auto param = module.lookupSymbol<ParamOp>(ref.getName());
  if (param && param.isTrainable())
    trainable.insert(ref.getResult());
  auto it = paramSplits.find(ref.getName());
  if (it == paramSplits.end() || it->second.kind != Layout::Split)
    return success();
  splitResult(ref.getResult(),
              Layout::make(Layout::Split, it->second.dim, it->second.parts));
  return success();
}

LogicalResult TensorParallelLayout::visit(Operation *op) {
  if (auto ref = dyn_cast<ParamRefOp>(op))
    return visitParamRef(ref);
  // A result depends on trainable parameters when an operand does; the
  // rules mark the values of ops they replace.
  if (!isa<StopGradientOp>(op) &&
      llvm::any_of(op->getOperands(),
                   [&](Value value) { return trainable.contains(value); }))
    for (Value result : op->getResults())
      if (isa<FloatType>(getElementTypeOrSelf(result.getType())))
        trainable.insert(result);
  // Most ops see no split operand and stay as they are.
  if (!op->hasAttr(MegDialect::kTpLayerAttrName) &&
      llvm::none_of(op->getOperands(),
                    [&](Value value) { return isSplit(value); }))
    return success();
  if (op->hasTrait<Elementwise>())
    return layOutElementwise(op, *this);
  if (auto rule = dyn_cast<TensorParallelOpInterface>(op))
    return rule.layOutOverTensorParallelGroup(*this);
  // Any other op (a function's return among them: results are whole on
  // every rank) runs on whole values.
  return makeWhole(op);
}

LogicalResult TensorParallelLayout::layOut(func::FuncOp func) {
  layouts.clear();
  trainable.clear();
  entered.clear();
  wholes.clear();
  blocks.clear();
  if (func.isExternal())
    return success();
  // The ops as written: those the rules insert are laid out already.
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (op != func)
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    if (op->getNumRegions())
      return op->emitError()
             << "meg-tensor-parallel runs before regions are formed";
    if (isa<ParamStoreOp>(op))
      return op->emitError() << "meg-tensor-parallel runs before meg-optimizer";
    if (failed(visit(op)))
      return failure();
  }
  // Entry points keep their signatures; a private function's results may
  // be split blocks for its callers only after inlining.
  func.setType(FunctionType::get(
      func.getContext(), func.getArgumentTypes(),
      func.getBody().front().getTerminator()->getOperandTypes()));
  return success();
}

struct MegTensorParallelPass
    : public mlir::meg::impl::MegTensorParallelBase<MegTensorParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<TensorParallelAttr>(
        MegDialect::kTensorParallelAttrName);
    if (!config) {
      // The model runs on one rank, where every layer is whole.
      removeLayerSplits(module);
      return;
    }
    auto mesh = module.lookupSymbol<MeshOp>(config.getMesh().getAttr());
    if (!mesh) {
      module.emitError() << "meg-tensor-parallel: mesh " << config.getMesh()
                         << " is not a meg.mesh";
      return signalPassFailure();
    }
    int64_t numRanks = 1;
    for (Attribute axis : config.getAxes())
      numRanks *=
          mesh.getAxisSize(cast<StringAttr>(axis).getValue()).value_or(1);
    registerGroup(module, mesh, config);

    TensorParallelLayout layout(module, config, numRanks);
    if (failed(layout.planParams()))
      return signalPassFailure();
    layout.splitParams();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(layout.layOut(func)))
        return signalPassFailure();
    numGathered += layout.numGathered;
    // The layout is done: the layers' splits are the parameters' shardings
    // now, and a second run finds nothing to do.
    removeLayerSplits(module);
    module->removeAttr(MegDialect::kTensorParallelAttrName);
  }

  static void removeLayerSplits(ModuleOp module) {
    module.walk(
        [](Operation *op) { op->removeAttr(MegDialect::kTpLayerAttrName); });
  }

  /// Registers the group's submesh unless the module has.
  static void registerGroup(ModuleOp module, MeshOp mesh,
                            TensorParallelAttr config) {
    for (auto submesh : module.getOps<SubmeshOp>())
      if (submesh.getMeshAttr() == config.getMesh() &&
          submesh.getAxesAttr() == config.getAxes())
        return;
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(mesh);
    SubmeshOp::create(builder, mesh.getLoc(), config.getMesh(),
                      config.getAxes());
  }
};

} // namespace
