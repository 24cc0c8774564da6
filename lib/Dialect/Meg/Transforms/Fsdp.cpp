//===- Fsdp.cpp - the meg-fsdp pass ------------------------------------===//
//
// FSDP / HSDP after Megatron-FSDP's strategy table: shards model weights,
// master weights and optimizer state over the dp_shard group, gathers
// sharded weights before each unit's use (one unit ahead, and again for
// backward), reduces gradients in buckets (reduce-scatter or all-reduce on
// dp_shard, then all-reduce or reduce-scatter on dp_outer), updates only the
// local shard, and averages the outputs of every entry over the
// data-parallel group. Expert blocks (split over ep, a shard axis) are
// sharded and reduced over the shard axes less their block axes.
//
// One pass, over 600 lines: sharding, the gathers' units and prefetch, the
// gradient buckets and the sharded update are one strategy table applied
// to one module; each step reads the layouts the first one computes.
//
//===----------------------------------------------------------------------===//

#include "Clipping.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGFSDP
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Where a trainable parameter and its optimizer state live.
struct Layout {
  ParamOp weight;
  /// The master copy (meg.state_of main_param), or null when the weight is
  /// its own master; the AdamW moments.
  ParamOp master, expAvg, expAvgSq;
  /// The weight's tensor-parallel blocks (#meg.sharding with dim), whose
  /// block this rank's pieces split further; null when it is whole.
  ShardingAttr blocks;
  /// The shape the pieces split: the weight's, a block under tensor
  /// parallelism.
  SmallVector<int64_t> shape;
  /// The data-parallel axes that split the pieces and reduce the
  /// gradient: the shard axes, less those that split the weight into
  /// blocks (ep, which splits the experts, while each rank of it computes
  /// on its own tokens); and those of the optimizer state.
  ArrayAttr shardAxes, stateAxes;
  int64_t shardSize = 1;
  /// The outer axes and the shard axes: the group a gradient entry's
  /// output is averaged over.
  ArrayAttr dataAxes;
  /// How many ranks of the data-parallel group hold other blocks (ep):
  /// the gradient a rank computes for its block is already the sum over
  /// their tokens (the all-to-alls brought them), so its mean over the
  /// group is the reduced gradient over this many.
  int64_t blockShare = 1;
  int64_t elements = 0;
  /// Elements after padding, a multiple of the sharding unit.
  int64_t padded = 0;
  /// Elements per rank over dp_shard, and of the optimizer state.
  int64_t weightPiece = 0, statePiece = 0;
};

/// The rewrite of one module.
class FsdpRewriter {
public:
  FsdpRewriter(ModuleOp module, FsdpAttr config, StringRef step)
      : module(module), builder(module.getContext()), config(config),
        step(step) {}

  LogicalResult run();

private:
  MLIRContext &getContext() { return *module.getContext(); }
  LogicalResult configure();
  ArrayAttr registerGroup(ArrayRef<Attribute> axes);
  int64_t groupSize(ArrayAttr axes);
  void placeLayout(Layout &layout);
  void shardParameters();
  LogicalResult gatherWeights(func::FuncOp func);
  LogicalResult shardOptimizer(func::FuncOp step);
  template <typename Update>
  LogicalResult clipReducedGradients(MutableArrayRef<Update> updates,
                                     Operation *firstUpdate);
  void averageOutputs(func::FuncOp func);
  void averageLabelCounts(func::FuncOp func);
  void sumOverData(func::FuncOp func);
  void sumNonfinite(func::FuncOp func);

  // Value builders at the builder's insertion point.
  Value paramRef(ParamOp param, Location loc);
  Value flatten(Value value, Location loc);
  Value padTo(Value flat, int64_t elements, Location loc);
  Value slice1d(Value flat, int64_t offset, int64_t size, Location loc);
  Value reshape(Value value, ArrayRef<int64_t> shape, Location loc);
  Value castTo(Value value, Type element, Location loc);
  Value scaleBy(Value value, double factor, Location loc);
  Value gatherWhole(Value piece, Layout &layout, Location loc);

  ModuleOp module;
  OpBuilder builder;
  FsdpAttr config;
  std::string step;
  MeshOp mesh;
  ArrayAttr shardAxes, outerAxes, dataAxes, stateAxes;
  /// The axes that split the batch (dataAxes less the context-parallel
  /// ones) and their ranks.
  ArrayAttr batchAxes;
  int64_t batchSize = 1;
  int64_t shardSize = 1, outerSize = 1;
  bool weightsSharded = false, stateSharded = false, gradsSharded = false,
       outerOptim = false;
  llvm::MapVector<StringRef, Layout> layouts;
  /// Master copy -> the parameter it trains.
  llvm::DenseMap<StringAttr, StringAttr> mastered;
};

/// The unit a parameter is gathered with: its transformer layer
/// (meg.layer), or itself.
std::string unitOf(ParamOp param) {
  if (std::optional<int64_t> layer = param.getLayer())
    return "layer " + std::to_string(*layer);
  return param.getSymName().str();
}

int64_t product(ArrayRef<int64_t> shape) {
  int64_t result = 1;
  for (int64_t extent : shape)
    result *= extent;
  return result;
}

/// The op of `block` that contains `op`.
Operation *topLevel(Operation *op, Block *block) {
  while (op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

LogicalResult FsdpRewriter::run() {
  if (failed(configure()))
    return failure();
  shardParameters();
  for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
    if (func.isExternal())
      continue;
    averageLabelCounts(func);
    sumOverData(func);
    if (failed(gatherWeights(func)))
      return failure();
    if (func.getName() == step) {
      if (failed(shardOptimizer(func)))
        return failure();
      sumNonfinite(func);
    }
    if (func.isPublic())
      averageOutputs(func);
  }
  return success();
}

struct MegFsdpPass : public mlir::meg::impl::MegFsdpBase<MegFsdpPass> {
  using MegFsdpBase::MegFsdpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<FsdpAttr>(MegDialect::kFsdpAttrName);
    if (config && failed(FsdpRewriter(module, config, step).run()))
      signalPassFailure();
  }
};

LogicalResult FsdpRewriter::configure() {
  mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(module,
                                                      config.getMesh());
  if (!mesh)
    return module.emitError() << "meg-fsdp: the fsdp configuration names "
                              << config.getMesh() << ", which is not a mesh";
  // Axes other than shard and outer (tensor parallelism) are the model's:
  // each data-parallel group holds one rank of every other axis.
  // Tensor-parallel blocks are split further; a piece is not.
  for (ParamOp param : module.getOps<ParamOp>())
    if (ShardingAttr sharding = param.getShardingAttr();
        sharding && sharding.isFlat())
      return param.emitError()
             << "meg-fsdp: @" << param.getSymName()
             << " is sharded already into pieces of the flattened tensor; "
                "only whole parameters and tensor-parallel blocks are "
                "sharded";
  FsdpStrategy strategy = config.getStrategy();
  weightsSharded = strategy == FsdpStrategy::optim_grads_params;
  gradsSharded = weightsSharded || strategy == FsdpStrategy::optim_grads;
  stateSharded = strategy != FsdpStrategy::no_shard;
  outerOptim = config.getOuterStrategy() == FsdpStrategy::optim;

  shardAxes = registerGroup(config.getShard().getValue());
  shardSize = groupSize(shardAxes);
  SmallVector<Attribute> data;
  if (config.getOuter()) {
    outerAxes = registerGroup(config.getOuter().getValue());
    outerSize = groupSize(outerAxes);
    llvm::append_range(data, config.getOuter().getValue());
  }
  llvm::append_range(data, config.getShard().getValue());
  dataAxes = registerGroup(data);
  batchAxes = config.getBatchAxes();
  if (batchAxes != dataAxes)
    batchAxes = registerGroup(batchAxes.getValue());
  batchSize = groupSize(batchAxes);
  stateAxes = shardAxes;
  if (outerOptim) {
    // Shard-major, so that a rank's outer piece lies inside its dp_shard
    // piece.
    SmallVector<Attribute> both(config.getShard().getValue());
    llvm::append_range(both, config.getOuter().getValue());
    stateAxes = registerGroup(both);
  }
  return success();
}

int64_t FsdpRewriter::groupSize(ArrayAttr axes) {
  int64_t size = 1;
  for (Attribute axis : axes)
    size *= *mesh.getAxisSize(cast<StringAttr>(axis).getValue());
  return size;
}

/// Registers the group of `axes` (once) right after the mesh.
ArrayAttr FsdpRewriter::registerGroup(ArrayRef<Attribute> axes) {
  ArrayAttr attr = ArrayAttr::get(&getContext(), axes);
  for (SubmeshOp submesh : module.getOps<SubmeshOp>())
    if (submesh.getMeshAttr() == config.getMesh() &&
        submesh.getAxesAttr() == attr)
      return attr;
  Operation *after = mesh;
  for (SubmeshOp submesh : module.getOps<SubmeshOp>())
    after = submesh;
  builder.setInsertionPointAfter(after);
  SubmeshOp::create(builder, mesh.getLoc(), config.getMesh(), attr);
  return attr;
}

/// The groups of a parameter: the shard axes less its block axes.
void FsdpRewriter::placeLayout(Layout &layout) {
  ArrayAttr blockAxes =
      layout.blocks ? layout.blocks.getBlockGroup() : ArrayAttr();
  SmallVector<Attribute> axes, blockData;
  for (Attribute axis : config.getShard())
    if (blockAxes && llvm::is_contained(blockAxes, axis))
      blockData.push_back(axis);
    else
      axes.push_back(axis);
  if (blockData.empty()) {
    layout.shardAxes = shardAxes;
    layout.shardSize = shardSize;
    layout.stateAxes = stateAxes;
    layout.dataAxes = dataAxes;
    return;
  }
  layout.shardAxes = registerGroup(axes);
  layout.shardSize = groupSize(layout.shardAxes);
  layout.blockShare =
      groupSize(ArrayAttr::get(&getContext(), blockData));
  layout.stateAxes = layout.shardAxes;
  if (outerOptim) {
    SmallVector<Attribute> both(axes);
    llvm::append_range(both, config.getOuter().getValue());
    layout.stateAxes = registerGroup(both);
  }
  SmallVector<Attribute> data;
  if (config.getOuter())
    llvm::append_range(data, config.getOuter().getValue());
  llvm::append_range(data, axes);
  layout.dataAxes = registerGroup(data);
}

void FsdpRewriter::shardParameters() {
  // Each parameter's optimizer state, as meg-optimizer recorded it.
  llvm::DenseMap<std::pair<StringAttr, unsigned>, ParamOp> states;
  for (ParamOp state : module.getOps<ParamOp>())
    if (StateOfAttr of = state.getStateOf())
      states[{of.getParam().getAttr(), static_cast<unsigned>(of.getRole())}] =
          state;
  auto stateOf = [&](ParamOp param, StateRole role) {
    return states.lookup({param.getSymNameAttr(), static_cast<unsigned>(role)});
  };
  for (ParamOp param : module.getOps<ParamOp>()) {
    if (!param.isTrainable())
      continue;
    Layout layout;
    layout.weight = param;
    layout.master = stateOf(param, StateRole::main_param);
    layout.expAvg = stateOf(param, StateRole::exp_avg);
    layout.expAvgSq = stateOf(param, StateRole::exp_avg_sq);
    if (layout.master)
      mastered[layout.master.getSymNameAttr()] = param.getSymNameAttr();
    layout.blocks = param.getShardingAttr();
    placeLayout(layout);
    int64_t unit = layout.shardSize * (outerOptim ? outerSize : 1);
    layout.shape = llvm::to_vector(param.getTensorType().getShape());
    layout.elements = product(layout.shape);
    layout.padded = (layout.elements + unit - 1) / unit * unit;
    layout.weightPiece = layout.padded / layout.shardSize;
    layout.statePiece =
        outerOptim ? layout.weightPiece / outerSize : layout.weightPiece;
    layouts[param.getSymName()] = layout;
  }
  // A tensor-parallel block is split into pieces in turn: the sharding
  // keeps the whole shape, the block's dim and its axes.
  auto shard = [&](ParamOp param, ArrayAttr axes, int64_t piece,
                   const Layout &layout) {
    param.setType(RankedTensorType::get(
        {piece}, param.getTensorType().getElementType()));
    ShardingAttr blocks = layout.blocks;
    param.setShardingAttr(
        blocks ? ShardingAttr::get(&getContext(), config.getMesh(), axes,
                                   blocks.getShape(), blocks.getDim(),
                                   blocks.getBlockGroup())
               : ShardingAttr::get(&getContext(), config.getMesh(), axes,
                                   layout.shape));
  };
  for (auto &[name, layout] : layouts) {
    if (stateSharded) {
      for (ParamOp moment : {layout.expAvg, layout.expAvgSq})
        if (moment)
          shard(moment, layout.stateAxes, layout.statePiece, layout);
      if (layout.master)
        shard(layout.master, layout.stateAxes, layout.statePiece, layout);
    }
    if (weightsSharded)
      shard(layout.weight, layout.shardAxes, layout.weightPiece, layout);
  }
}

Value FsdpRewriter::paramRef(ParamOp param, Location loc) {
  return ParamRefOp::create(builder, loc, param.getTensorType(),
                            FlatSymbolRefAttr::get(param));
}

Value FsdpRewriter::reshape(Value value, ArrayRef<int64_t> shape,
                           Location loc) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(builder, loc, type.clone(shape), value);
}

Value FsdpRewriter::flatten(Value value, Location loc) {
  auto type = cast<RankedTensorType>(value.getType());
  return reshape(value, {type.getNumElements()}, loc);
}

/// Appends zeros to a 1-D tensor.
Value FsdpRewriter::padTo(Value flat, int64_t elements, Location loc) {
  auto type = cast<RankedTensorType>(flat.getType());
  int64_t missing = elements - type.getDimSize(0);
  if (missing == 0)
    return flat;
  auto zerosType = type.clone({missing});
  Value zeros = arith::ConstantOp::create(
      builder, loc, zerosType,
      DenseElementsAttr::get(zerosType,
                             builder.getZeroAttr(type.getElementType())));
  return ConcatOp::create(builder, loc, ValueRange{flat, zeros}, builder.getI64IntegerAttr(0));
}

Value FsdpRewriter::slice1d(Value flat, int64_t offset, int64_t size,
                           Location loc) {
  if (offset == 0 &&
      cast<RankedTensorType>(flat.getType()).getDimSize(0) == size)
    return flat;
  return SliceOp::create(builder, loc, flat, ArrayRef<int64_t>{offset},
                         ArrayRef<int64_t>{size}, ArrayRef<int64_t>{1});
}

/// `value` times a constant.
Value FsdpRewriter::scaleBy(Value value, double factor, Location loc) {
  auto element = cast<FloatType>(
      cast<RankedTensorType>(value.getType()).getElementType());
  auto scalarType = RankedTensorType::get({1}, element);
  Value constant = arith::ConstantOp::create(
      builder, loc, scalarType,
      DenseElementsAttr::get(scalarType,
                             builder.getFloatAttr(element, factor)));
  return MulOp::create(builder, loc, value, constant);
}

Value FsdpRewriter::castTo(Value value, Type element, Location loc) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  return CastOp::create(builder, loc, type.clone(element), value);
}

/// The whole weight from its dp_shard piece (blocking all-gather).
Value FsdpRewriter::gatherWhole(Value piece, Layout &layout,
                               Location loc) {
  auto type = cast<RankedTensorType>(piece.getType());
  Value full = AllGatherOp::create(builder, loc, type.clone({layout.padded}),
                                   piece, config.getMesh(), layout.shardAxes,
                                   builder.getI64IntegerAttr(0));
  return reshape(slice1d(full, 0, layout.elements, loc), layout.shape, loc);
}

/// Replaces every read of a sharded weight by its all-gathered value. The
/// uses are grouped by unit (a transformer layer) and phase (forward, and
/// backward after the loss under optim_grads_params); each group's
/// gathers start when the previous group's values are first used and are
/// waited for right before the group's first use.
LogicalResult FsdpRewriter::gatherWeights(func::FuncOp func) {
  if (!weightsSharded)
    return success();
  Block &body = func.getBody().front();
  // Reads that only dead work uses (the gradient of an input nobody asks
  // for) must not cost a gather.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(body))
    position[&op] = index;
  // The loss (named result "loss") separates forward from backward.
  std::optional<unsigned> boundary;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto name = func.getResultAttrOfType<StringAttr>(
        index, MegDialect::kNameAttrName);
    if (name && name.getValue() == "loss" && value.getDefiningOp() &&
        func.getName() != "loss")
      boundary = position[topLevel(value.getDefiningOp(), &body)];
  }

  struct Group {
    unsigned first = ~0u;
    Operation *firstUser = nullptr;
    llvm::MapVector<StringRef, SmallVector<OpOperand *>> uses;
  };
  std::map<std::pair<std::string, bool>, Group> groups;
  SmallVector<ParamRefOp> refs;
  for (auto ref : body.getOps<ParamRefOp>()) {
    auto it = layouts.find(ref.getName());
    if (it == layouts.end())
      continue;
    refs.push_back(ref);
    for (OpOperand &use : ref->getUses()) {
      Operation *user = topLevel(use.getOwner(), &body);
      // The sharded optimizer reads the local piece (shardOptimizer).
      if (isa<AdamWOp>(user))
        continue;
      bool backward = boundary && position[user] > *boundary;
      Group &group = groups[{unitOf(it->second.weight), backward}];
      if (position[user] < group.first) {
        group.first = position[user];
        group.firstUser = user;
      }
      group.uses[ref.getName()].push_back(&use);
    }
  }
  SmallVector<Group *> order;
  for (auto &entry : groups)
    order.push_back(&entry.second);
  llvm::sort(order, [](Group *a, Group *b) { return a->first < b->first; });

  for (auto [index, group] : llvm::enumerate(order)) {
    Location loc = group->firstUser->getLoc();
    // Prefetch: start while the previous group computes.
    builder.setInsertionPoint(index == 0 ? group->firstUser
                                         : order[index - 1]->firstUser);
    SmallVector<std::pair<StringRef, Value>> futures;
    for (auto &[name, uses] : group->uses) {
      Layout &layout = layouts[name];
      Value piece = paramRef(layout.weight, loc);
      auto element = layout.weight.getTensorType().getElementType();
      auto future = FutureType::get(
          &getContext(), RankedTensorType::get({layout.padded}, element));
      Value started = AllGatherStartOp::create(
          builder, loc, future, piece, config.getMesh(), layout.shardAxes,
          builder.getI64IntegerAttr(0));
      futures.push_back({name, started});
    }
    builder.setInsertionPoint(group->firstUser);
    for (auto [name, future] : futures) {
      Layout &layout = layouts[name];
      Value full = WaitOp::create(builder, loc, future);
      full = reshape(slice1d(full, 0, layout.elements, loc), layout.shape,
                     loc);
      for (OpOperand *use : group->uses[name])
        use->set(full);
    }
  }
  for (ParamRefOp ref : refs)
    if (ref->use_empty())
      ref.erase();
  return success();
}

/// Global-norm clipping after the reduction: meg-optimizer's norm read the
/// rank's own gradients; the norm is taken again from the reduced
/// gradients the updates read, each rank summing the squares of its pieces
/// and the partial sums added over the groups whose ranks hold distinct
/// pieces (padding is zeros). The updates' scale and the returned grad_norm
/// follow it.
template <typename Update>
LogicalResult FsdpRewriter::clipReducedGradients(MutableArrayRef<Update> updates,
                                                 Operation *firstUpdate) {
  AdamWOp first = updates.front().adamw;
  if (!first.getGradScale())
    return success();
  builder.setInsertionPoint(firstUpdate);
  Location loc = first.getLoc();
  // Blocks of a tensor-parallel parameter add their squares over the
  // group that splits them; a parameter the whole group holds counts once.
  Value sum;
  llvm::MapVector<ArrayAttr, Value> blockSums;
  auto addTo = [&](Value &total, Value squares) {
    total = total ? Value(AddOp::create(builder, loc, total, squares))
                  : squares;
  };
  for (Update &update : updates) {
    if (!update.adamw.getGradScale())
      return update.adamw.emitError()
             << "meg-fsdp: some updates clip their gradients and others not";
    Value squares = sumOfSquares(builder, loc, update.grad);
    ShardingAttr sharding = update.layout->blocks;
    // Blocks split over data-parallel axes (experts over ep) are summed
    // with everything else when the state is sharded: the shard group's
    // ranks then hold distinct pieces of them too.
    if (sharding && !(stateSharded && update.layout->blockShare > 1))
      addTo(blockSums[sharding.getBlockGroup()], squares);
    else
      addTo(sum, squares);
  }
  auto add = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::sum);
  auto allReduce = [&](Value scalar, ArrayAttr axes) -> Value {
    Value one = reshape(scalar, {1}, loc);
    Value total = AllReduceOp::create(builder, loc, one.getType(), one,
                                      config.getMesh(), axes, add);
    return reshape(total, {}, loc);
  };
  for (auto &[axes, partial] : blockSums)
    addTo(sum, allReduce(partial, axes));
  auto combine = [&](ArrayAttr axes) { sum = allReduce(sum, axes); };
  if (stateSharded)
    combine(shardAxes);
  if (outerAxes && outerOptim)
    combine(outerAxes);
  Value norm = SqrtOp::create(builder, loc, sum);
  Value scale = clipScale(builder, loc, norm,
                          first.getConfig().getClipGrad().convertToDouble());
  for (Update &update : updates)
    update.adamw.getGradScaleMutable().assign(scale);
  auto func = firstUpdate->getParentOfType<func::FuncOp>();
  Operation *ret = func.getBody().front().getTerminator();
  for (OpOperand &operand : ret->getOpOperands()) {
    auto name = func.getResultAttrOfType<StringAttr>(
        operand.getOperandNumber(), MegDialect::kNameAttrName);
    if (!name || name.getValue() != "grad_norm")
      continue;
    // The finiteness check reads the reduced norm too, once it exists.
    Value old = operand.get();
    operand.set(norm);
    for (OpOperand &use : llvm::make_early_inc_range(old.getUses()))
      if (auto check = dyn_cast<CountNonfiniteOp>(use.getOwner())) {
        use.set(norm);
        check->moveAfter(norm.getDefiningOp());
      }
  }
  return success();
}

/// Every rank skips the same steps: the count of non-finite values is
/// summed over the data-parallel group.
void FsdpRewriter::sumNonfinite(func::FuncOp func) {
  auto add = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::sum);
  func.walk([&](CountNonfiniteOp check) {
    builder.setInsertionPointAfter(check);
    Value local = check.getResult();
    Value total = AllReduceOp::create(builder, check.getLoc(), local.getType(),
                                      local, config.getMesh(), dataAxes, add);
    local.replaceAllUsesExcept(total, total.getDefiningOp());
  });
}

/// Buckets the gradients, reduces them over the data-parallel group and
/// runs AdamW on the local shard of the optimizer state.
LogicalResult FsdpRewriter::shardOptimizer(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(body))
    position[&op] = index;
  auto policy =
      module->getAttrOfType<PrecisionAttr>(MegDialect::kPrecisionAttrName);

  struct Update {
    AdamWOp adamw;
    Layout *layout;
    unsigned ready;     // position of the gradient's definition
    int64_t offset = 0; // in its bucket (elements, per rank row)
    Value grad;         // the reduced gradient the update reads
    Attribute stages;   // under a pipeline, the stages holding the weight
  };
  SmallVector<Update> updates;
  for (AdamWOp adamw : body.getOps<AdamWOp>()) {
    auto ref = adamw.getParam().getDefiningOp<ParamRefOp>();
    StringRef name = ref ? ref.getName() : "";
    if (StringAttr trained =
            mastered.lookup(ref ? ref.getNameAttr().getAttr() : StringAttr()))
      name = trained.getValue();
    auto it = layouts.find(name);
    if (it == layouts.end())
      return adamw.emitError()
             << "meg-fsdp: cannot tell which parameter this update trains";
    Operation *def = adamw.getGrad().getDefiningOp();
    updates.push_back(
        {adamw, &it->second, def ? position[topLevel(def, &body)] : 0u});
    if (auto param = module.lookupSymbol<ParamOp>(name))
      updates.back().stages = param->getAttr(MegDialect::kStagesAttrName);
  }
  if (updates.empty())
    return success();
  llvm::sort(updates, [](const Update &a, const Update &b) {
    return a.ready < b.ready;
  });
  Operation *firstUpdate = updates.front().adamw;
  for (Update &update : updates)
    if (update.adamw->isBeforeInBlock(firstUpdate))
      firstUpdate = update.adamw;

  // Buckets in the order gradients become ready.
  Type reduceType = policy ? policy.getGradReduce() : Type();
  int64_t bucketBytes = config.getBucketMb() * (int64_t(1) << 20);
  SmallVector<SmallVector<Update *>> buckets(1);
  int64_t filled = 0;
  auto elementOf = [&](Update &update) {
    return reduceType ? reduceType
                      : cast<RankedTensorType>(update.adamw.getGrad().getType())
                            .getElementType();
  };
  for (Update &update : updates) {
    Type element = elementOf(update);
    int64_t bytes =
        update.layout->padded * element.getIntOrFloatBitWidth() / 8;
    // A bucket reduces over one group: experts over their own; under a
    // pipeline, each stage's weights over their own; and holds one element
    // type (without a grad_reduce policy, gradients kept in f32, such as a
    // router's bias's, are reduced apart from bf16 ones).
    if (!buckets.back().empty() &&
        (filled + bytes > bucketBytes ||
         buckets.back().front()->layout->shardAxes !=
             update.layout->shardAxes ||
         buckets.back().front()->stages != update.stages ||
         elementOf(*buckets.back().front()) != element)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(&update);
    filled += bytes;
  }

  // Each bucket's reduction starts once its last gradient exists and
  // completes once the next bucket's has started (the last one's right
  // before the optimizer), so that one reduction overlaps the backward at
  // a time and the full gradients die early: meg-schedule-updates then runs
  // each update right after its reduced gradient.
  SmallVector<Value> futures;
  SmallVector<Operation *> starts;
  for (SmallVector<Update *> &bucket : buckets) {
    Update *last = bucket.back();
    Location loc = last->adamw.getLoc();
    // Start the reduction once the bucket's last gradient exists.
    Operation *lastDef = nullptr;
    for (Update *update : bucket)
      if (Operation *def = update->adamw.getGrad().getDefiningOp()) {
        def = topLevel(def, &body);
        if (!lastDef || lastDef->isBeforeInBlock(def))
          lastDef = def;
      }
    if (lastDef)
      builder.setInsertionPointAfter(lastDef);
    else
      builder.setInsertionPointToStart(&body);
    SmallVector<Value> rows;
    int64_t width = 0;
    Type element;
    ArrayAttr groupAxes = bucket.front()->layout->shardAxes;
    int64_t groupRanks = bucket.front()->layout->shardSize;
    for (Update *update : bucket) {
      Value grad = update->adamw.getGrad();
      element = reduceType ? reduceType
                           : cast<RankedTensorType>(grad.getType())
                                 .getElementType();
      Value flat = flatten(castTo(grad, element, loc), loc);
      if (update->layout->blockShare > 1)
        flat = scaleBy(flat, 1.0 / update->layout->blockShare, loc);
      update->offset = width;
      if (gradsSharded) {
        flat = padTo(flat, update->layout->padded, loc);
        rows.push_back(
            reshape(flat, {groupRanks, update->layout->weightPiece}, loc));
        width += update->layout->weightPiece;
      } else {
        rows.push_back(flat);
        width += update->layout->elements;
      }
    }
    Value joined = rows.size() == 1
                       ? rows.front()
                       : ConcatOp::create(builder, loc, rows,
                                          builder.getI64IntegerAttr(gradsSharded ? 1 : 0)).getResult();
    auto avg = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::avg);
    auto resultType = RankedTensorType::get({width}, element);
    Value future;
    if (gradsSharded)
      future = ReduceScatterStartOp::create(
          builder, loc, FutureType::get(&getContext(), resultType),
          flatten(joined, loc), config.getMesh(), groupAxes,
          builder.getI64IntegerAttr(0), avg);
    else
      future = AllReduceStartOp::create(
          builder, loc, FutureType::get(&getContext(), resultType), joined,
          config.getMesh(), groupAxes, avg);

    futures.push_back(future);
    starts.push_back(future.getDefiningOp());
  }

  for (auto [index, bucket] : llvm::enumerate(buckets)) {
    Location loc = bucket.back()->adamw.getLoc();
    RankedTensorType resultType =
        cast<FutureType>(futures[index].getType()).getValueType();
    Type element = resultType.getElementType();
    auto avg = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::avg);
    // The wait, then the outer stage.
    if (index + 1 < starts.size())
      builder.setInsertionPointAfter(starts[index + 1]);
    else
      builder.setInsertionPoint(firstUpdate);
    Value reduced = WaitOp::create(builder, loc, futures[index]);
    if (outerAxes && outerOptim) {
      SmallVector<Value> pieces;
      int64_t outerWidth = 0;
      for (Update *update : bucket) {
        Value piece = slice1d(reduced, update->offset,
                              update->layout->weightPiece, loc);
        pieces.push_back(reshape(
            piece, {outerSize, update->layout->statePiece}, loc));
        update->offset = outerWidth;
        outerWidth += update->layout->statePiece;
      }
      Value outerJoined =
          pieces.size() == 1
              ? pieces.front()
              : ConcatOp::create(builder, loc, pieces, builder.getI64IntegerAttr(1)).getResult();
      reduced = ReduceScatterOp::create(
          builder, loc, RankedTensorType::get({outerWidth}, element),
          flatten(outerJoined, loc), config.getMesh(), outerAxes, builder.getI64IntegerAttr(0), avg);
    } else if (outerAxes) {
      reduced = AllReduceOp::create(builder, loc, resultType, reduced,
                                    config.getMesh(), outerAxes, avg);
    }
    for (Update *update : bucket) {
      Layout &layout = *update->layout;
      Type gradElement =
          cast<RankedTensorType>(update->adamw.getGrad().getType())
              .getElementType();
      int64_t size = !gradsSharded ? layout.elements
                     : outerOptim  ? layout.statePiece
                                   : layout.weightPiece;
      Value grad = castTo(slice1d(reduced, update->offset, size, loc),
                          gradElement, loc);
      if (!stateSharded) {
        grad = reshape(grad, layout.shape, loc);
      } else if (!gradsSharded) {
        // optim: replicated gradients, sharded state.
        auto pieceType = RankedTensorType::get({layout.weightPiece},
                                               gradElement);
        grad = ShardSliceOp::create(builder, loc, pieceType,
                                    padTo(grad, layout.padded, loc),
                                    config.getMesh(), layout.shardAxes,
                                    builder.getI64IntegerAttr(0));
      }
      update->grad = grad;
    }
  }

  if (failed(clipReducedGradients(MutableArrayRef<Update>(updates), firstUpdate)))
    return failure();

  // The updates themselves.
  auto ret = body.getTerminator();
  llvm::StringMap<ParamStoreOp> stores;
  for (ParamStoreOp store : body.getOps<ParamStoreOp>())
    stores[store.getName()] = store;
  for (Update &update : updates) {
    AdamWOp adamw = update.adamw;
    Layout &layout = *update.layout;
    Location loc = adamw.getLoc();
    if (!stateSharded) {
      adamw.getGradMutable().assign(update.grad);
      continue;
    }
    builder.setInsertionPoint(adamw);
    StringRef name = layout.weight.getSymName();
    Value master;
    if (layout.master) {
      master = paramRef(layout.master, loc);
    } else if (weightsSharded) {
      master = paramRef(layout.weight, loc);
      if (outerOptim)
        master = ShardSliceOp::create(
            builder, loc,
            RankedTensorType::get({layout.statePiece},
                                  layout.weight.getTensorType()
                                      .getElementType()),
            master, config.getMesh(), outerAxes, builder.getI64IntegerAttr(0));
    } else {
      Value whole = padTo(flatten(paramRef(layout.weight, loc), loc),
                          layout.padded, loc);
      master = ShardSliceOp::create(
          builder, loc,
          RankedTensorType::get({layout.weightPiece},
                                layout.weight.getTensorType()
                                    .getElementType()),
          whole, config.getMesh(), layout.shardAxes,
          builder.getI64IntegerAttr(0));
    }
    if (!layout.expAvg || !layout.expAvgSq)
      return adamw.emitError() << "meg-fsdp: @" << layout.weight.getSymName()
                               << " has no AdamW moments (meg.state_of)";
    auto sharded = AdamWOp::create(
        builder, loc, master, update.grad, paramRef(layout.expAvg, loc),
        paramRef(layout.expAvgSq, loc), adamw.getStep(), adamw.getLr(),
        adamw.getGradScale(), adamw.getSkip(), adamw.getConfig());

    // The weight from the new master piece.
    builder.setInsertionPoint(ret);
    Type weightElement = layout.weight.getTensorType().getElementType();
    Value weight = castTo(sharded.getNewParam(), weightElement, loc);
    if (weightsSharded && outerOptim)
      weight = AllGatherOp::create(
          builder, loc,
          RankedTensorType::get({layout.weightPiece}, weightElement), weight,
          config.getMesh(), outerAxes, builder.getI64IntegerAttr(0));
    else if (!weightsSharded)
      weight = gatherWhole(weight, layout, loc);

    SmallVector<std::pair<std::string, Value>> writes = {
        {name.str(), weight},
        {layout.expAvg.getSymName().str(), sharded.getNewExpAvg()},
        {layout.expAvgSq.getSymName().str(), sharded.getNewExpAvgSq()}};
    if (layout.master)
      writes.push_back(
          {layout.master.getSymName().str(), sharded.getNewParam()});
    for (auto &[target, value] : writes) {
      if (ParamStoreOp old = stores.lookup(target))
        old.erase();
      ParamStoreOp::create(builder, loc, target, value);
    }
    // The old update and whatever only it read (full-size state reads).
    SmallVector<Operation *> operands;
    for (Value operand : adamw->getOperands())
      if (Operation *def = operand.getDefiningOp())
        operands.push_back(def);
    for (Value result : adamw->getResults())
      for (Operation *user : llvm::make_early_inc_range(result.getUsers()))
        if (user->use_empty() && isa<CastOp>(user))
          user->erase();
    if (!adamw->use_empty())
      return adamw.emitError()
             << "meg-fsdp: the update of @" << name
             << " is read by more than its parameter stores";
    adamw.erase();
    for (Operation *def : operands)
      if (isa<ParamRefOp>(def) && def->use_empty())
        def->erase();
  }
  return success();
}

/// A global label count becomes the mean over the data-parallel group of
/// each rank's count: each rank's loss, its sum over its labels divided by
/// that mean, averages to the global sum over the global count.
void FsdpRewriter::averageLabelCounts(func::FuncOp func) {
  auto avg = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::avg);
  func.walk([&](LabelCountOp count) {
    if (!count.getGlobal())
      return;
    count.setGlobal(false);
    builder.setInsertionPointAfter(count);
    Value local = count.getResult();
    Value mean = AllReduceOp::create(builder, count.getLoc(), local.getType(),
                                     local, config.getMesh(), dataAxes, avg);
    local.replaceAllUsesExcept(mean, mean.getDefiningOp());
  });
}

/// A statistic of the whole batch (meg.data_sum) is the sum over the
/// data-parallel group of each rank's.
void FsdpRewriter::sumOverData(func::FuncOp func) {
  auto add = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::sum);
  SmallVector<DataSumOp> sums;
  func.walk([&](DataSumOp sum) { sums.push_back(sum); });
  for (DataSumOp sum : sums) {
    builder.setInsertionPoint(sum);
    Value total = AllReduceOp::create(builder, sum.getLoc(), sum.getType(),
                                      sum.getInput(), config.getMesh(),
                                      dataAxes, add);
    sum.replaceAllUsesWith(total);
    sum.erase();
  }
}

/// Every rank computes on its own tokens: scalar results (the loss) and
/// gradients are averaged over the data-parallel group, others gathered
/// along the batch dimension over the ranks that split the batch.
void FsdpRewriter::averageOutputs(func::FuncOp func) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  builder.setInsertionPoint(ret);
  auto avg = CollectiveReduceAttr::get(&getContext(), CollectiveReduce::avg);
  for (OpOperand &operand : ret->getOpOperands()) {
    auto type = cast<RankedTensorType>(operand.get().getType());
    auto name = func.getResultAttrOfType<StringAttr>(
        operand.getOperandNumber(), MegDialect::kNameAttrName);
    ParamOp gradOf = gradientParam(func, operand.getOperandNumber());
    bool gradient = static_cast<bool>(gradOf);
    // The clipping norm is already that of the reduced gradients, and the
    // count of non-finite values the group's sum.
    if (name && (name.getValue() == "grad_norm" ||
                 name.getValue() == "nonfinite"))
      continue;
    Location loc = ret.getLoc();
    // A gradient of expert blocks is averaged over the ranks that hold the
    // same experts (see Layout::blockShare).
    const Layout *layout = nullptr;
    if (gradient) {
      auto it = layouts.find(gradOf.getSymName());
      if (it != layouts.end())
        layout = &it->second;
    }
    if (layout && layout->blockShare > 1) {
      Value mean = AllReduceOp::create(builder, loc, type, operand.get(),
                                       config.getMesh(), layout->dataAxes,
                                       avg);
      operand.set(scaleBy(mean, 1.0 / layout->blockShare, loc));
    } else if ((type.getRank() == 0 || gradient) &&
               isa<FloatType>(type.getElementType())) {
      operand.set(AllReduceOp::create(builder, loc, type, operand.get(),
                                      config.getMesh(), dataAxes, avg));
    } else if (type.getRank() > 0 && batchSize > 1) {
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= batchSize;
      operand.set(AllGatherOp::create(builder, loc, type.clone(shape),
                                      operand.get(), config.getMesh(),
                                      batchAxes, builder.getI64IntegerAttr(0)));
    }
  }
  func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(),
                                               ret.getOperandTypes()));
}

} // namespace
