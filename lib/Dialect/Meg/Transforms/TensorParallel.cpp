//===- TensorParallel.cpp - the meg-tensor-parallel pass -----------------===//
//
// Lays a model written for one device out over the tensor-parallel group
// of its `meg.tensor_parallel` (Megatron's layout): the layers that record
// a #meg.tp_layer split their parameters, the splits follow the data
// through every function, and collectives complete them where an op needs
// a split dimension whole.
//
// One pass, over 600 lines: the layout of every value and the rule of each
// op class (the sharding rules) are one propagation; moving the rules onto
// the ops as an interface is what would shorten it.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGTENSORPARALLEL
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// How a value lies over the group: whole on every rank, split into
/// `parts` contiguous blocks along `dim` (rank r holding block r), or a
/// group's block: `dim` cut into `parts` blocks, of which tp / parts
/// consecutive ranks share one (key/value heads fewer than the ranks).
struct Layout {
  enum Kind { Whole, Split, GroupBlock };
  Kind kind = Whole;
  int64_t dim = -1;
  int64_t parts = 1;

  static Layout make(Kind kind, int64_t dim, int64_t parts) {
    return {kind, dim, parts};
  }
  bool isWhole() const { return kind == Whole; }
  Layout moved(int64_t newDim) const { return {kind, newDim, parts}; }
  bool operator==(const Layout &other) const {
    return kind == other.kind && dim == other.dim && parts == other.parts;
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }
};

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

/// Tags the ops it sees inserted with the transformer layer (`meg.layer`)
/// of the op they are built for.
struct LayerTagger : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (layer)
      op->setAttr(MegDialect::kLayerAttrName, layer);
  }
  Attribute layer;
};

class TensorParallelLayout {
public:
  TensorParallelLayout(ModuleOp module, TensorParallelAttr config,
                       int64_t ranks)
      : module(module), config(config), ranks(ranks),
        builder(module.getContext()) {
    builder.setListener(&tagger);
  }

  LogicalResult planParams();
  void splitParams();
  LogicalResult layOut(func::FuncOp func);
  /// Values gathered whole because an op needed them so.
  int64_t numGathered = 0;

private:
  // Collectives over the group, and the values they make.
  FlatSymbolRefAttr mesh() const { return config.getMesh(); }
  ArrayAttr axes() const { return config.getAxes(); }
  void buildAt(Operation *anchor);
  void buildAfter(Value value);
  Value allReduce(Value value, CollectiveReduce reduce);
  Value gatherAlong(Value shard, int64_t dim);
  Value reduceScatterAlong(Value partial, int64_t dim);
  Value firstOfBlock(int64_t blockSize);
  Value groupBlock(Value whole, int64_t groups);
  /// `value`, whole on every rank, entering the group (its gradient summed
  /// over the ranks) when it depends on trainable parameters.
  Value enter(Value value);
  /// A split `value` gathered whole (once per value).
  FailureOr<Value> gathered(Value value, Operation *user);
  /// This rank's block along `dim` of a whole `value` (once per value).
  Value sliced(Value value, int64_t dim);
  /// Gathers every split operand of `op`, which then runs on whole values.
  LogicalResult makeWhole(Operation *op);
  /// `build()` once per `key`, right after `value`'s definition, depending
  /// on trainable parameters as `value` does; `cache` holds the results.
  template <typename Key>
  Value onceAfter(DenseMap<Key, Value> &cache, Key key, Value value,
                  function_ref<Value()> build);

  Layout layoutOf(Value value) const {
    auto it = layouts.find(value);
    return it == layouts.end() ? Layout() : it->second;
  }
  /// Gives a result of an op written for one device its layout, and the
  /// type of this rank's part.
  void splitResult(Value value, const Layout &layout) {
    if (layout.isWhole())
      return;
    layouts[value] = layout;
    value.setType(localType(value.getType(), layout));
  }
  bool isSplit(Value value) const { return !layoutOf(value).isWhole(); }
  /// The whole extents of a value whose type is this rank's part.
  SmallVector<int64_t> wholeShape(Value value) const;
  void markTrainableLike(Value result, Value source) {
    if (trainable.contains(source))
      trainable.insert(result);
  }

  InFlightDiagnostic error(Operation *op) {
    return op->emitError() << "meg-tensor-parallel: ";
  }

  // Rules, one per kind of op; each gives the op's results their layouts.
  LogicalResult visit(Operation *op);
  LogicalResult visitParamRef(ParamRefOp ref);
  LogicalResult visitLinear(LinearOp linear);
  LogicalResult visitColumn(LinearOp linear);
  LogicalResult visitRow(LinearOp linear);
  LogicalResult visitEmbedding(EmbeddingOp embedding);
  LogicalResult visitElementwise(Operation *op);
  LogicalResult visitNormalization(Operation *op, Value input);
  LogicalResult visitRope(RopeOp rope);
  LogicalResult visitAttention(AttentionOp attention);
  LogicalResult visitReshape(ReshapeOp reshape);
  LogicalResult visitTranspose(TransposeOp op);
  LogicalResult visitSlice(SliceOp slice);
  LogicalResult visitConcat(ConcatOp concat);
  LogicalResult visitSplit(SplitOp split);
  LogicalResult visitBroadcast(BroadcastOp broadcast);
  LogicalResult visitReduce(ReduceOp reduce);
  LogicalResult visitCrossEntropy(CrossEntropyOp loss);
  LogicalResult visitReturn(func::ReturnOp ret);

  ModuleOp module;
  TensorParallelAttr config;
  int64_t ranks;
  OpBuilder builder;
  LayerTagger tagger;
  llvm::StringMap<ParamSplit> paramSplits;
  // Per function.
  DenseMap<Value, Layout> layouts;
  DenseSet<Value> trainable;
  DenseMap<Value, Value> entered, wholes;
  DenseMap<std::pair<Value, int64_t>, Value> blocks;
};

void TensorParallelLayout::buildAt(Operation *anchor) {
  tagger.layer = anchor->getAttr(MegDialect::kLayerAttrName);
  builder.setInsertionPoint(anchor);
}

void TensorParallelLayout::buildAfter(Value value) {
  if (Operation *def = value.getDefiningOp()) {
    tagger.layer = def->getAttr(MegDialect::kLayerAttrName);
    builder.setInsertionPointAfter(def);
    return;
  }
  tagger.layer = {};
  builder.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
}

Value TensorParallelLayout::allReduce(Value value, CollectiveReduce reduce) {
  return AllReduceOp::create(
      builder, value.getLoc(), value.getType(), value, mesh(), axes(),
      CollectiveReduceAttr::get(builder.getContext(), reduce));
}

/// The permutation that brings `dim` to the front (the runtime's
/// collectives move contiguous pieces along dim 0), and its inverse.
static std::pair<SmallVector<int64_t>, SmallVector<int64_t>>
toFrontAndBack(int64_t rank, int64_t dim) {
  SmallVector<int64_t> front = {dim}, back(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      front.push_back(d);
  for (int64_t d = 0; d < rank; ++d)
    back[front[d]] = d;
  return {front, back};
}

/// Builds a collective over `value` with `dim` moved to dim 0, of a type
/// whose dim 0 is that extent times `times` over `over`, and moves the
/// result's dim 0 back.
template <typename Build>
static Value alongDim(OpBuilder &builder, Value value, int64_t dim,
                      int64_t times, int64_t over, Build build) {
  auto type = cast<RankedTensorType>(value.getType());
  auto [front, back] = toFrontAndBack(type.getRank(), dim);
  auto move = [&](Value v, ArrayRef<int64_t> permutation) -> Value {
    if (dim == 0)
      return v;
    return TransposeOp::create(builder, v.getLoc(), v,
                               builder.getDenseI64ArrayAttr(permutation));
  };
  Value moved = move(value, front);
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(moved.getType()).getShape());
  shape[0] = shape[0] * times / over;
  return move(build(moved, type.clone(shape)), back);
}

Value TensorParallelLayout::gatherAlong(Value shard, int64_t dim) {
  return alongDim(builder, shard, dim, ranks, 1, [&](Value moved, Type type) {
    return AllGatherOp::create(builder, shard.getLoc(), type, moved, mesh(),
                               axes(), builder.getI64IntegerAttr(0));
  });
}

Value TensorParallelLayout::reduceScatterAlong(Value partial, int64_t dim) {
  return alongDim(builder, partial, dim, 1, ranks, [&](Value moved, Type type) {
    return ReduceScatterOp::create(
        builder, partial.getLoc(), type, moved, mesh(), axes(),
        builder.getI64IntegerAttr(0),
        CollectiveReduceAttr::get(builder.getContext(), CollectiveReduce::sum));
  });
}

Value TensorParallelLayout::firstOfBlock(int64_t blockSize) {
  Location loc = builder.getInsertionPoint()->getLoc();
  auto starts = RankedTensorType::get({ranks}, builder.getI32Type());
  SmallVector<int32_t> values;
  for (int64_t r = 0; r < ranks; ++r)
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
      builder, loc, tensor({groups, ranks / groups, elements}), grouped);
  Value perRank =
      ReshapeOp::create(builder, loc, tensor({ranks, elements}), copies);
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
  buildAfter(value);
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
    return alongDim(builder, value, dim, 1, ranks,
                    [&](Value moved, Type type) -> Value {
                      return ShardSliceOp::create(builder, value.getLoc(), type,
                                                  moved, mesh(), axes(),
                                                  builder.getI64IntegerAttr(0));
                    });
  });
  layouts[block] = Layout::make(Layout::Split, dim, ranks);
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
                               {Layout::Split, 0, ranks, op}))
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        }
        auto linear = cast<LinearOp>(op);
        if (layer.getKind() == TpLayerKind::row) {
          return failed(decide(op, linear.getWeight(), "weight",
                               {Layout::Split, 1, ranks, op}))
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        }
        int64_t out =
            cast<RankedTensorType>(linear.getWeight().getType()).getDimSize(0);
        int64_t groups = layer.getGroups();
        ParamSplit split = {Layout::Split, 0, ranks, op};
        if (groups && out % groups != 0) {
          linear.emitError()
              << "meg-tensor-parallel: " << groups
              << " groups do not divide the " << out << " output features";
          return WalkResult::interrupt();
        }
        if (groups && groups % ranks != 0) {
          if (ranks % groups != 0) {
            linear.emitError()
                << "meg-tensor-parallel: a column-parallel layer splits its "
                << groups << " groups of output features over " << ranks
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

LogicalResult TensorParallelLayout::visitLinear(LinearOp linear) {
  if (auto layer =
          linear->getAttrOfType<TpLayerAttr>(MegDialect::kTpLayerAttrName))
    return layer.getKind() == TpLayerKind::row ? visitRow(linear)
                                               : visitColumn(linear);
  // A layer the builder did not split runs on whole weights: over the rows
  // of an input split along them, on whole values otherwise.
  Layout layout = layoutOf(linear.getInput());
  int64_t rank = cast<RankedTensorType>(linear.getType()).getRank();
  if (isSplit(linear.getWeight()) ||
      (linear.getBias() && isSplit(linear.getBias())) || layout.dim == rank - 1)
    return makeWhole(linear);
  buildAt(linear);
  linear.getWeightMutable().assign(enter(linear.getWeight()));
  if (linear.getBias())
    linear.getBiasMutable().assign(enter(linear.getBias()));
  splitResult(linear.getResult(), layout);
  return success();
}

LogicalResult TensorParallelLayout::visitColumn(LinearOp linear) {
  // The input whole on every rank (a sequence block gathered), entering the
  // group: each rank's block of outputs gives part of its gradient.
  FailureOr<Value> input = gathered(linear.getInput(), linear);
  if (failed(input))
    return failure();
  buildAt(linear);
  linear.getInputMutable().assign(enter(*input));
  const ParamSplit &split =
      paramSplits
          .find(linear.getWeight().getDefiningOp<ParamRefOp>().getName())
          ->second;
  if (split.kind == Layout::GroupBlock) {
    linear.getWeightMutable().assign(
        groupBlock(linear.getWeight(), split.parts));
    if (linear.getBias())
      linear.getBiasMutable().assign(groupBlock(linear.getBias(), split.parts));
  }
  int64_t rank = cast<RankedTensorType>(linear.getType()).getRank();
  splitResult(linear.getResult(),
              Layout::make(split.kind, rank - 1, split.parts));
  return success();
}

LogicalResult TensorParallelLayout::visitRow(LinearOp linear) {
  auto type = cast<RankedTensorType>(linear.getType());
  int64_t features = type.getRank() - 1;
  Layout expected = Layout::make(Layout::Split, features, ranks);
  // An input not split along its features is made so: gathered, then this
  // rank's block taken (Megatron's scatter to the tensor-parallel region).
  if (layoutOf(linear.getInput()) != expected) {
    FailureOr<Value> whole = gathered(linear.getInput(), linear);
    if (failed(whole))
      return failure();
    linear.getInputMutable().assign(sliced(*whole, features));
  }
  buildAt(linear);
  bool sequenceParallel = config.getSequenceParallel();
  if (sequenceParallel && (type.getRank() < 3 || type.getDimSize(1) % ranks))
    return error(linear) << "sequence parallelism splits dim 1 of " << type
                         << " into " << ranks
                         << " blocks, which do not divide it";
  Value partial = LinearOp::create(builder, linear.getLoc(), linear.getInput(),
                                   linear.getWeight(), Value());
  Value result = sequenceParallel ? reduceScatterAlong(partial, 1)
                                  : allReduce(partial, CollectiveReduce::sum);
  // The bias after the sum; with sequence parallelism it is added to this
  // rank's block of the sequence, so its gradient is summed over the group.
  if (Value bias = linear.getBias())
    result = AddOp::create(builder, linear.getLoc(), result,
                           sequenceParallel ? enter(bias) : bias);
  trainable.insert(result);
  if (sequenceParallel)
    layouts[result] = Layout::make(Layout::Split, 1, ranks);
  linear.getResult().replaceAllUsesWith(result);
  linear.erase();
  return success();
}

LogicalResult TensorParallelLayout::visitEmbedding(EmbeddingOp embedding) {
  if (!embedding->hasAttr(MegDialect::kTpLayerAttrName)) {
    if (isSplit(embedding.getTable()))
      return makeWhole(embedding);
    splitResult(embedding.getResult(), layoutOf(embedding.getIds()));
    return success();
  }
  FailureOr<Value> ids = gathered(embedding.getIds(), embedding);
  if (failed(ids))
    return failure();
  embedding.getIdsMutable().assign(*ids);
  // Each rank looks the ids up in its block of rows (zero rows for the
  // others) and the ranks' rows are summed.
  auto type = cast<RankedTensorType>(embedding.getType());
  bool sequenceParallel = config.getSequenceParallel();
  if (sequenceParallel && (type.getRank() < 3 || type.getDimSize(1) % ranks))
    return error(embedding)
           << "sequence parallelism splits dim 1 of " << type << " into "
           << ranks << " blocks, which do not divide it";
  buildAt(embedding);
  int64_t rows =
      cast<RankedTensorType>(embedding.getTable().getType()).getDimSize(0);
  Value partial =
      EmbeddingOp::create(builder, embedding.getLoc(), embedding.getTable(),
                          embedding.getIds(), firstOfBlock(rows));
  Value result = sequenceParallel ? reduceScatterAlong(partial, 1)
                                  : allReduce(partial, CollectiveReduce::sum);
  if (sequenceParallel)
    layouts[result] = Layout::make(Layout::Split, 1, ranks);
  markTrainableLike(result, embedding.getTable());
  embedding.getResult().replaceAllUsesWith(result);
  embedding.erase();
  return success();
}

LogicalResult TensorParallelLayout::visitElementwise(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = type.getRank();
  auto alignedDim = [&](Value operand, int64_t dim) {
    return dim + rank - cast<RankedTensorType>(operand.getType()).getRank();
  };
  // The result takes the first split operand's layout (dimensions aligned
  // at the end, as NumPy broadcasting aligns them); an operand split
  // another way is gathered.
  Layout result;
  for (OpOperand &operand : op->getOpOperands()) {
    Layout layout = layoutOf(operand.get());
    if (layout.isWhole())
      continue;
    Layout aligned = layout.moved(alignedDim(operand.get(), layout.dim));
    if (result.isWhole()) {
      result = aligned;
      continue;
    }
    if (aligned == result)
      continue;
    FailureOr<Value> whole = gathered(operand.get(), op);
    if (failed(whole))
      return failure();
    operand.set(*whole);
  }
  // Whole operands: broadcast along the split dimension, they enter the
  // group; otherwise this rank takes its block of them.
  buildAt(op);
  for (OpOperand &operand : op->getOpOperands()) {
    if (isSplit(operand.get()))
      continue;
    auto operandType = cast<RankedTensorType>(operand.get().getType());
    int64_t dim = result.dim - (rank - operandType.getRank());
    if (dim < 0 || operandType.getDimSize(dim) == 1) {
      operand.set(enter(operand.get()));
      continue;
    }
    if (result.kind == Layout::GroupBlock)
      return error(op) << "operand #" << operand.getOperandNumber()
                       << " is whole along dim " << dim
                       << ", where another is the block of one of "
                       << result.parts << " groups that ranks share";
    operand.set(sliced(operand.get(), dim));
  }
  splitResult(op->getResult(0), result);
  return success();
}

LogicalResult TensorParallelLayout::visitNormalization(Operation *op,
                                                       Value input) {
  Layout layout = layoutOf(input);
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  if (layout.isWhole() || layout.dim == rank - 1 ||
      llvm::any_of(op->getOperands(), [&](Value operand) {
        return operand != input && isSplit(operand);
      }))
    return makeWhole(op);
  // Over the unsplit last dimension, on this rank's rows; the weights,
  // applied to part of the rows, enter the group.
  buildAt(op);
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() != input)
      operand.set(enter(operand.get()));
  splitResult(op->getResult(0), layout);
  return success();
}

LogicalResult TensorParallelLayout::visitRope(RopeOp rope) {
  Layout layout = layoutOf(rope.getInput());
  int64_t sequence = rope.getLayout() == RopeLayout::bshd ? 1 : 0;
  if (layout.isWhole() || layout.dim == sequence || layout.dim == 3 ||
      isSplit(rope.getCos()) || isSplit(rope.getSin()))
    return makeWhole(rope);
  buildAt(rope);
  rope.getCosMutable().assign(enter(rope.getCos()));
  rope.getSinMutable().assign(enter(rope.getSin()));
  splitResult(rope.getResult(), layout);
  return success();
}

LogicalResult TensorParallelLayout::visitAttention(AttentionOp attention) {
  // Heads (dim 2) or the batch (dim 0) split alike in q, k and v; keys and
  // values may be a group's block when the query heads are split.
  Layout query = layoutOf(attention.getQuery());
  bool aligned = !query.isWhole() && (query.dim == 0 || query.dim == 2);
  for (unsigned index : {1u, 2u}) {
    Layout layout = layoutOf(attention->getOperand(index));
    bool groupOfHeads = query.kind == Layout::Split && query.dim == 2 &&
                        layout.kind == Layout::GroupBlock && layout.dim == 2;
    aligned &= layout == query || groupOfHeads;
  }
  if (!aligned)
    return makeWhole(attention);
  splitResult(attention.getResult(), query);
  if (Value stats = attention.getStats())
    splitResult(stats, query.moved(query.dim == 2 ? 1 : 0));
  return success();
}

LogicalResult TensorParallelLayout::visitReshape(ReshapeOp reshape) {
  Layout layout = layoutOf(reshape.getInput());
  SmallVector<int64_t> in = wholeShape(reshape.getInput());
  ArrayRef<int64_t> out = cast<RankedTensorType>(reshape.getType()).getShape();
  // The blocks stay contiguous in a result dimension with as many elements
  // before it as the split one has, and which the blocks divide.
  int64_t before = 1;
  for (int64_t d = 0; d < layout.dim; ++d)
    before *= in[d];
  int64_t prefix = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    if (prefix == before && out[d] % layout.parts == 0 &&
        (out[d] > 1 || layout.parts == 1)) {
      splitResult(reshape.getResult(), layout.moved(d));
      return success();
    }
    prefix *= out[d];
  }
  return makeWhole(reshape);
}

LogicalResult TensorParallelLayout::visitTranspose(TransposeOp op) {
  Layout layout = layoutOf(op.getInput());
  ArrayRef<int64_t> permutation = op.getPermutation();
  int64_t dim = llvm::find(permutation, layout.dim) - permutation.begin();
  splitResult(op.getResult(), layout.moved(dim));
  return success();
}

LogicalResult TensorParallelLayout::visitSlice(SliceOp slice) {
  Layout layout = layoutOf(slice.getInput());
  int64_t d = layout.dim;
  if (slice.getOffsets()[d] != 0 ||
      slice.getSizes()[d] != wholeShape(slice.getInput())[d] ||
      slice.getStrides()[d] != 1)
    return makeWhole(slice);
  SmallVector<int64_t> sizes(slice.getSizes());
  sizes[d] /= layout.parts;
  slice.setSizesAttr(builder.getDenseI64ArrayAttr(sizes));
  splitResult(slice.getResult(), layout);
  return success();
}

LogicalResult TensorParallelLayout::visitConcat(ConcatOp concat) {
  Layout layout = layoutOf(concat.getInputs().front());
  if (layout.isWhole() ||
      layout.dim == static_cast<int64_t>(concat.getAxis()) ||
      llvm::any_of(concat.getInputs(),
                   [&](Value input) { return layoutOf(input) != layout; }))
    return makeWhole(concat);
  splitResult(concat.getResult(), layout);
  return success();
}

LogicalResult TensorParallelLayout::visitSplit(SplitOp split) {
  Layout layout = layoutOf(split.getInput());
  if (layout.dim == static_cast<int64_t>(split.getAxis()))
    return makeWhole(split);
  for (Value result : split.getResults())
    splitResult(result, layout);
  return success();
}

LogicalResult TensorParallelLayout::visitBroadcast(BroadcastOp broadcast) {
  Layout layout = layoutOf(broadcast.getInput());
  auto type = cast<RankedTensorType>(broadcast.getType());
  int64_t dim =
      layout.dim + type.getRank() -
      cast<RankedTensorType>(broadcast.getInput().getType()).getRank();
  if (type.getDimSize(dim) != wholeShape(broadcast.getInput())[layout.dim])
    return makeWhole(broadcast);
  splitResult(broadcast.getResult(), layout.moved(dim));
  return success();
}

LogicalResult TensorParallelLayout::visitReduce(ReduceOp reduce) {
  Layout layout = layoutOf(reduce.getInput());
  ArrayRef<int64_t> dims = reduce.getDims();
  if (!llvm::is_contained(dims, layout.dim)) {
    int64_t dim = layout.dim;
    if (!reduce.getKeepDims())
      dim -= llvm::count_if(dims, [&](int64_t d) { return d < layout.dim; });
    splitResult(reduce.getResult(), layout.moved(dim));
    return success();
  }
  if (layout.kind != Layout::Split)
    return makeWhole(reduce);
  // Each rank reduces its block and the group completes the reduction (a
  // mean, of equal blocks, is the sum of the blocks' means over the ranks).
  OpBuilder::InsertionGuard guard(builder);
  tagger.layer = reduce->getAttr(MegDialect::kLayerAttrName);
  builder.setInsertionPointAfter(reduce);
  auto completed = AllReduceOp::create(
      builder, reduce.getLoc(), reduce.getType(), reduce.getResult(), mesh(),
      axes(),
      CollectiveReduceAttr::get(builder.getContext(),
                                reduce.getKind() == ReduceKind::max
                                    ? CollectiveReduce::max
                                    : CollectiveReduce::sum));
  Value result = completed.getResult();
  if (reduce.getKind() == ReduceKind::mean) {
    auto type = cast<RankedTensorType>(result.getType());
    auto scalar = RankedTensorType::get({}, type.getElementType());
    result = DivOp::create(
        builder, reduce.getLoc(), result,
        arith::ConstantOp::create(
            builder, reduce.getLoc(), scalar,
            DenseElementsAttr::get(
                scalar, builder.getFloatAttr(type.getElementType(),
                                             static_cast<double>(ranks)))));
  }
  reduce.getResult().replaceAllUsesExcept(result, completed);
  markTrainableLike(result, reduce.getResult());
  return success();
}

LogicalResult TensorParallelLayout::visitCrossEntropy(CrossEntropyOp loss) {
  Value logits = loss.getLogits();
  Layout layout = layoutOf(logits);
  auto type = cast<RankedTensorType>(logits.getType());
  int64_t rank = type.getRank();
  if (layout.kind != Layout::Split || layout.dim != rank - 1 ||
      isSplit(loss.getLabels()))
    return makeWhole(loss);
  // Megatron's vocab-parallel cross-entropy, in f32, on the logits of this
  // rank's classes; the maximum only keeps exp() in range (the loss does
  // not depend on it).
  buildAt(loss);
  Location loc = loss.getLoc();
  Type f32 = builder.getF32Type();
  Value wide = type.getElementType() == f32
                   ? logits
                   : CastOp::create(builder, loc, type.clone(f32), logits);
  Value localMax = ReduceOp::create(builder, loc, ReduceKind::max, wide,
                                    SmallVector<int64_t>{rank - 1},
                                    /*keep_dims=*/false);
  Value max = StopGradientOp::create(
      builder, loc, allReduce(localMax, CollectiveReduce::max));
  int64_t classes = type.getShape().back();
  auto stats = VocabShardStatsOp::create(
      builder, loc, logits, max, loss.getLabels(), firstOfBlock(classes),
      builder.getI64IntegerAttr(classes * ranks), loss.getIgnoreIndexAttr());
  Value sumExp = allReduce(stats.getSumExp(), CollectiveReduce::sum);
  Value target = allReduce(stats.getTarget(), CollectiveReduce::sum);
  Value perToken = MulOp::create(
      builder, loc,
      SubOp::create(
          builder, loc,
          AddOp::create(builder, loc, LogOp::create(builder, loc, sumExp), max),
          target),
      stats.getMask());
  SmallVector<int64_t> tokens;
  for (int64_t d = 0; d + 1 < rank; ++d)
    tokens.push_back(d);
  Value total = ReduceOp::create(builder, loc, ReduceKind::sum, perToken,
                                 tokens, /*keep_dims=*/false);
  if (loss.getReduction() == ReduceKind::mean) {
    auto scalar = RankedTensorType::get({}, f32);
    double count = static_cast<double>(type.getNumElements()) /
                   static_cast<double>(classes);
    total = DivOp::create(
        builder, loc, total,
        arith::ConstantOp::create(
            builder, loc, scalar,
            DenseElementsAttr::get(scalar, builder.getF32FloatAttr(count))));
  }
  markTrainableLike(total, logits);
  loss.getResult().replaceAllUsesWith(total);
  loss.erase();
  return success();
}

LogicalResult TensorParallelLayout::visitReturn(func::ReturnOp ret) {
  // Results are whole on every rank.
  return makeWhole(ret);
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
    return visitElementwise(op);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](LinearOp linear) { return visitLinear(linear); })
      .Case([&](EmbeddingOp embedding) { return visitEmbedding(embedding); })
      .Case([&](RmsNormOp norm) {
        return visitNormalization(norm, norm.getInput());
      })
      .Case([&](LayerNormOp norm) {
        return visitNormalization(norm, norm.getInput());
      })
      .Case([&](SoftmaxOp softmax) {
        return visitNormalization(softmax, softmax.getInput());
      })
      .Case([&](RopeOp rope) { return visitRope(rope); })
      .Case([&](AttentionOp attention) { return visitAttention(attention); })
      .Case([&](ReshapeOp reshape) { return visitReshape(reshape); })
      .Case([&](TransposeOp transpose) { return visitTranspose(transpose); })
      .Case([&](SliceOp slice) { return visitSlice(slice); })
      .Case([&](ConcatOp concat) { return visitConcat(concat); })
      .Case([&](SplitOp split) { return visitSplit(split); })
      .Case([&](BroadcastOp broadcast) { return visitBroadcast(broadcast); })
      .Case([&](ReduceOp reduce) { return visitReduce(reduce); })
      .Case([&](CrossEntropyOp loss) { return visitCrossEntropy(loss); })
      .Case([&](func::ReturnOp ret) { return visitReturn(ret); })
      // Any other op runs on whole values.
      .Default([&](Operation *op) { return makeWhole(op); });
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
    int64_t ranks = 1;
    for (Attribute axis : config.getAxes())
      ranks *= mesh.getAxisSize(cast<StringAttr>(axis).getValue()).value_or(1);
    registerGroup(module, mesh, config);

    TensorParallelLayout layout(module, config, ranks);
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
