//===- Remat.cpp - the meg-remat pass ----------------------------------===//
//
// Activation recomputation. In a function that returns a loss and runs a
// backward after it, the forward ops of each transformer layer (meg.layer,
// recorded by the model's builder) keep values alive from the forward until
// the backward reads them. Recomputing a layer clones the ops that produce
// those values right before the layer's backward first reads one, from what
// the layer keeps: its inputs (full) or also its matrix products
// (selective). With a memory budget the pass estimates the static plan's
// peak and recomputes as little as it must.
//
// Over 600 lines: the units, the policies that choose what each keeps,
// and the budget's search over them share one Rematerializer and its peak
// estimate of the function as it is rewritten.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/IR/PipelinePass.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGREMAT
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// How much of a layer is recomputed, in increasing memory saved.
enum class Level { None = 0, Selective = 1, Full = 2 };

std::string megabytes(uint64_t bytes) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.3f MB", bytes / 1e6);
  return text;
}

uint64_t bytesOf(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValueType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !tensor.getElementType().isIntOrFloat())
    return 0;
  return static_cast<uint64_t>(tensor.getNumElements()) *
         ((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// Work the selective level keeps: its results are what the recomputation
/// starts from.
bool isMatrixProduct(Operation *op) { return op->hasTrait<MatrixProduct>(); }

/// An op that is never recomputed: it reads a parameter, is a constant, or
/// talks to other ranks. A blocking all-gather of an activation (a layer's
/// input gathered over the sequence-parallel or context-parallel ranks) is
/// the exception: every rank of its group runs the same program, so each
/// gathers again in the backward, as Megatron-LM's sequence parallelism
/// does, instead of keeping the gathered copy, tp times its piece, from
/// the forward.
bool isPinned(Operation *op) {
  if (isa<AllGatherOp>(op))
    return false;
  return isa<ParamRefOp, WaitOp>(op) || op->hasTrait<OpTrait::ConstantLike>() ||
         !isMemoryEffectFree(op);
}

/// The peak of the static memory plan of `block`, estimated the way the
/// planner counts: every intermediate lives from the op that writes it to
/// the last op that reads it (or one of its views); parameters, inputs,
/// constants, returned values and updates stored into a parameter take no
/// arena.
uint64_t estimatePeak(Block &block) {
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [index, op] : llvm::enumerate(block))
    position[&op] = index;
  llvm::DenseMap<Value, Value> root;
  struct Life {
    int64_t first, last;
    uint64_t bytes;
  };
  llvm::MapVector<Value, Life> lives;
  for (Operation &op : block) {
    int64_t here = position[&op];
    for (Value operand : op.getOperands())
      if (Value storage = root.lookup(operand))
        lives[storage].last = std::max(lives[storage].last, here);
    if (isa<ParamRefOp>(op) || op.hasTrait<OpTrait::ConstantLike>())
      continue;
    for (Value result : op.getResults()) {
      if (isa<ReshapeOp, WaitOp>(op)) {
        if (Value storage = root.lookup(op.getOperand(0)))
          root[result] = storage;
        continue;
      }
      bool stored = llvm::any_of(result.getUsers(), [](Operation *user) {
        return isa<ParamStoreOp>(user);
      });
      bool returned = !result.use_empty() &&
                      llvm::all_of(result.getUsers(), [](Operation *user) {
                        return isa<func::ReturnOp>(user);
                      });
      uint64_t bytes = bytesOf(result.getType());
      if (stored || returned || !bytes)
        continue;
      root[result] = result;
      lives[result] = {here, here, bytes};
    }
  }
  // Sweep the starts and ends in order.
  std::vector<std::pair<int64_t, int64_t>> events; // (position, +/- bytes)
  for (auto &[value, life] : lives) {
    events.push_back({life.first * 2, static_cast<int64_t>(life.bytes)});
    events.push_back({life.last * 2 + 1, -static_cast<int64_t>(life.bytes)});
  }
  llvm::sort(events);
  int64_t live = 0, peak = 0;
  for (auto [at, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

/// One layer's forward in one function (a layer runs once per
/// micro-batch: each run is a unit of its own), or one chunk of a loss.
struct Unit {
  int64_t layer;
  llvm::SetVector<Operation *> ops; // in block order
  /// A chunk of meg-chunk-loss: always recomputed in full.
  bool lossChunk = false;
};

/// Whether `op` runs in a forward pass of a pipeline rank's schedule
/// (meg.pipeline_pass "forward.mbI").
bool inForwardPass(Operation &op) {
  std::optional<PipelinePass> pass = pipelinePassOf(&op);
  return pass && pass->kind == PipelinePass::Forward;
}

class Rematerializer {
public:
  /// A pipeline rank's program: its forward is the ops of its forward
  /// passes, each layer's run in one micro-batch's pass a unit.
  explicit Rematerializer(func::FuncOp func)
      : block(func.getBody().front()), pipelined(true) {
    for (Operation &op : block)
      if (inForwardPass(op))
        forward.insert(&op);
    collectUnits(MegDialect::kLayerAttrName, /*lossChunk=*/false);
  }

  Rematerializer(func::FuncOp func, Value loss) : block(func.getBody().front()) {
    // The forward: what the loss depends on.
    SmallVector<Operation *> worklist;
    auto reach = [&](Value value) {
      if (Operation *def = value.getDefiningOp())
        if (Operation *top = block.findAncestorOpInBlock(*def))
          if (forward.insert(top).second)
            worklist.push_back(top);
    };
    reach(loss);
    lossTop = block.findAncestorOpInBlock(*loss.getDefiningOp());
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          reach(operand);
      });
    }
    collectUnits(MegDialect::kLayerAttrName, /*lossChunk=*/false);
    collectUnits(MegDialect::kLossChunkAttrName, /*lossChunk=*/true);
  }

  /// The ops of the forward marked `attrName` = N, one unit per N and
  /// connected run (a layer runs once per micro-batch; in a pipeline
  /// rank's program a run stays within one pass).
  void collectUnits(StringRef attrName, bool lossChunk) {
    llvm::EquivalenceClasses<Operation *> runs;
    llvm::DenseMap<int64_t, SmallVector<Operation *>> byIndex;
    SmallVector<int64_t> order;
    for (Operation &op : block) {
      auto index = op.getAttrOfType<IntegerAttr>(attrName);
      if (!index || !forward.contains(&op) || isPinned(&op))
        continue;
      auto [it, inserted] = byIndex.try_emplace(index.getInt());
      if (inserted)
        order.push_back(index.getInt());
      it->second.push_back(&op);
      runs.insert(&op);
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (def->getBlock() == &block && runs.contains(def) &&
              def->getAttr(attrName) == index &&
              (!pipelined || def->getAttr(MegDialect::kPipelinePassAttrName) ==
                                 op.getAttr(MegDialect::kPipelinePassAttrName)))
            runs.unionSets(def, &op);
    }
    for (int64_t index : order) {
      llvm::DenseMap<Operation *, unsigned> unitOf;
      for (Operation *op : byIndex[index]) {
        Operation *leader = runs.getLeaderValue(op);
        auto [it, inserted] = unitOf.try_emplace(leader, units.size());
        if (inserted)
          units.push_back({index, {}, lossChunk});
        units[it->second].ops.insert(op);
      }
    }
  }

  size_t numUnits() const { return units.size(); }
  int64_t layerOf(size_t unit) const { return units[unit].layer; }

  /// Whether work runs after the forward: ops the loss does not depend on
  /// (the backward, the updates), besides reads and constants.
  bool hasBackward() const {
    // A pipeline rank's program has one when it runs a backward pass.
    if (pipelined)
      return llvm::any_of(block.without_terminator(), [](Operation &op) {
        std::optional<PipelinePass> pass = pipelinePassOf(&op);
        return pass && pass->kind != PipelinePass::Forward;
      });
    return llvm::any_of(block.without_terminator(), [&](Operation &op) {
      return !forward.contains(&op) && !isa<ParamRefOp>(op) &&
             !op.hasTrait<OpTrait::ConstantLike>();
    });
  }
  bool isLossChunk(size_t unit) const { return units[unit].lossChunk; }

  /// Recomputes each unit at its level; returns the ops inserted, or
  /// failure (with a diagnostic) where a level cannot be applied.
  FailureOr<unsigned> apply(ArrayRef<Level> levels) {
    unsigned inserted = 0;
    for (auto [unit, given] : llvm::zip(units, levels)) {
      Level level = unit.lossChunk ? Level::Full : given;
      if (level == Level::None)
        continue;
      FailureOr<unsigned> count = recompute(unit, level);
      if (failed(count))
        return failure();
      inserted += *count;
    }
    return inserted;
  }

private:
  /// Whether `top` reads an activation in the backward: after the loss,
  /// or, in a pipeline rank's program, in a backward or weight-gradient
  /// pass (a send of a layer's output is not one).
  bool readsInBackward(Operation *top) const {
    if (!top || forward.contains(top))
      return false;
    if (!pipelined)
      return true;
    std::optional<PipelinePass> pass = pipelinePassOf(top);
    return pass && pass->kind != PipelinePass::Forward;
  }

  FailureOr<unsigned> recompute(Unit &unit, Level level) {
    auto inUnit = [&](Operation *op) { return unit.ops.contains(op); };
    // The values the backward reads, apart from what the unit hands to
    // the rest of the forward (its outputs, which stay: the next layer
    // starts from them).
    SmallVector<Value> saved;
    for (Operation *op : unit.ops) {
      if (level == Level::Selective && isMatrixProduct(op))
        continue;
      for (Value result : op->getResults()) {
        bool backward = false, output = false;
        for (Operation *user : result.getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          if (!top)
            continue;
          if (readsInBackward(top))
            backward = true;
          else if (!inUnit(top))
            output = true;
        }
        if (backward && !output)
          saved.push_back(result);
      }
    }
    if (saved.empty())
      return 0u;
    // What recomputing them takes, within the unit: selective keeps the
    // matrix products.
    llvm::SetVector<Operation *> needed;
    SmallVector<Operation *> worklist;
    for (Value value : saved)
      worklist.push_back(value.getDefiningOp());
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!needed.insert(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (inUnit(def) &&
              !(level == Level::Selective && isMatrixProduct(def)))
            worklist.push_back(def);
    }
    // Backward work that an earlier pass placed in the forward (a view of
    // an activation next to it) moves down to its first user, so that the
    // copies can come before every read. The forward ends at the loss, or,
    // in a pipeline rank's program, with the unit's own pass.
    Operation *boundary = lossTop ? lossTop : unit.ops.back();
    SmallVector<Operation *> early;
    for (Value value : saved)
      for (Operation *user : value.getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (readsInBackward(top) && top->isBeforeInBlock(boundary) &&
            !llvm::is_contained(early, top))
          early.push_back(top);
      }
    llvm::sort(early,
               [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
    for (Operation *op : early) {
      if (!isMemoryEffectFree(op))
        return op->emitError() << "meg-remat: this op of the backward runs "
                                  "during the forward and cannot move";
      Operation *firstUser = nullptr;
      for (Operation *user : op->getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (top && (!firstUser || top->isBeforeInBlock(firstUser)))
          firstUser = top;
      }
      if (firstUser && boundary->isBeforeInBlock(firstUser))
        op->moveBefore(firstUser);
    }
    // Where the backward first reads one of them.
    Operation *first = nullptr;
    for (Value value : saved)
      for (Operation *user : value.getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (readsInBackward(top) && (!first || top->isBeforeInBlock(first)))
          first = top;
      }
    SmallVector<Operation *> ordered(needed.begin(), needed.end());
    llvm::sort(ordered,
               [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    OpBuilder builder(first);
    IRMapping mapping;
    // In a pipeline rank's program the copies run in the pass that first
    // reads them.
    Attribute pass = first->getAttr(MegDialect::kPipelinePassAttrName);
    // The weights FSDP gathered for the forward: the copies read them in
    // the backward.
    for (Operation *op : ordered)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def || needed.contains(def) || mapping.contains(operand))
          continue;
        SmallVector<Operation *> views;
        if (WaitOp wait = gatheredWeight(operand, views))
          mapping.map(operand, weightInBackward(operand, wait, views, first,
                                                builder, pass));
      }
    for (Operation *op : ordered) {
      Operation *copy = builder.clone(*op, mapping);
      copy->setAttr(MegDialect::kRecomputedAttrName, builder.getUnitAttr());
      if (pass)
        copy->setAttr(MegDialect::kPipelinePassAttrName, pass);
      else
        copy->removeAttr(MegDialect::kPipelinePassAttrName);
    }
    for (Value value : saved) {
      Value copy = mapping.lookup(value);
      value.replaceUsesWithIf(copy, [&](OpOperand &use) {
        Operation *top = block.findAncestorOpInBlock(*use.getOwner());
        return readsInBackward(top) &&
               !top->hasAttr(MegDialect::kRecomputedAttrName);
      });
    }
    return static_cast<unsigned>(ordered.size());
  }

  /// The weight FSDP gathered (the wait of an all-gather of a parameter's
  /// piece) that `value` is, through the views on it (`views`, in order).
  static WaitOp gatheredWeight(Value value,
                               SmallVectorImpl<Operation *> &views) {
    Operation *def = value.getDefiningOp();
    while (def && isa<ReshapeOp, SliceOp>(def)) {
      views.push_back(def);
      def = def->getOperand(0).getDefiningOp();
    }
    auto wait = dyn_cast_or_null<WaitOp>(def);
    auto start = wait ? wait.getFuture().getDefiningOp<AllGatherStartOp>()
                      : AllGatherStartOp();
    if (!start || !start.getInput().getDefiningOp<ParamRefOp>())
      return {};
    std::reverse(views.begin(), views.end());
    return wait;
  }

  /// Whether `value`, or a view of it, is read at `at` or after.
  bool readFrom(Value value, Operation *at) const {
    for (Operation *user : value.getUsers()) {
      Operation *top = block.findAncestorOpInBlock(*user);
      if (!top)
        continue;
      if (isa<ReshapeOp, SliceOp>(top) && readFrom(top->getResult(0), at))
        return true;
      if (top == at || at->isBeforeInBlock(top))
        return true;
    }
    return false;
  }

  /// The gathered weight `value` (the forward's, `wait` through `views`)
  /// for copies placed before `first`: the forward's where the backward
  /// reads it anyway (a step that keeps its weights gathered over its
  /// micro-batches); else the backward's own gather of the parameter,
  /// waited for before the copies; else a gather of its own, as ZeRO-3
  /// gathers again for a recomputed forward. A weight never stays gathered
  /// from the forward to the backward for recomputation's sake.
  Value weightInBackward(Value value, WaitOp wait, ArrayRef<Operation *> views,
                         Operation *first, OpBuilder &builder,
                         Attribute pass) {
    if (readFrom(wait.getResult(), first))
      return value;
    auto start = wait.getFuture().getDefiningOp<AllGatherStartOp>();
    auto piece = start.getInput().getDefiningOp<ParamRefOp>();
    // Another gather of the parameter that the backward reads (the
    // backward's group, waited for before or after `first`).
    WaitOp later;
    for (Operation *op = wait->getNextNode(); op; op = op->getNextNode()) {
      auto candidate = dyn_cast<WaitOp>(op);
      if (!candidate || candidate.getType() != wait.getType() ||
          !(first->isBeforeInBlock(candidate) ||
            readFrom(candidate.getResult(), first)))
        continue;
      auto otherStart =
          candidate.getFuture().getDefiningOp<AllGatherStartOp>();
      auto otherPiece = otherStart
                            ? otherStart.getInput().getDefiningOp<ParamRefOp>()
                            : ParamRefOp();
      if (otherPiece && otherPiece.getName() == piece.getName() &&
          otherStart.getMeshAttr() == start.getMeshAttr() &&
          otherStart.getAxesAttr() == start.getAxesAttr()) {
        later = candidate;
        break;
      }
    }
    Value gathered;
    if (later) {
      // Waited for before the copies (its start, and the read of the
      // piece, before the wait).
      auto otherStart = later.getFuture().getDefiningOp<AllGatherStartOp>();
      Operation *otherPiece = otherStart.getInput().getDefiningOp();
      auto moveBefore = [&](Operation *op, Operation *before) {
        op->moveBefore(before);
        if (pass)
          op->setAttr(MegDialect::kPipelinePassAttrName, pass);
      };
      if (first->isBeforeInBlock(later))
        moveBefore(later, first);
      if (later->isBeforeInBlock(otherStart))
        moveBefore(otherStart, later);
      if (otherStart->isBeforeInBlock(otherPiece))
        moveBefore(otherPiece, otherStart);
      gathered = later.getResult();
    } else {
      IRMapping chain;
      for (Operation *op : {piece.getOperation(), start.getOperation(),
                            wait.getOperation()}) {
        Operation *copy = builder.clone(*op, chain);
        if (pass)
          copy->setAttr(MegDialect::kPipelinePassAttrName, pass);
      }
      gathered = chain.lookup(wait.getResult());
    }
    IRMapping chain;
    chain.map(wait.getResult(), gathered);
    for (Operation *view : views) {
      Operation *copy = builder.clone(*view, chain);
      if (pass)
        copy->setAttr(MegDialect::kPipelinePassAttrName, pass);
    }
    return chain.lookup(value);
  }

  Block &block;
  /// A pipeline rank's program (the forward is its forward passes).
  bool pipelined = false;
  /// The op that computes the loss: the forward ends with it (none in a
  /// pipeline rank's program).
  Operation *lossTop = nullptr;
  llvm::DenseSet<Operation *> forward;
  SmallVector<Unit> units;
};

/// The value a function returns under the name "loss", if any.
Value lossOf(func::FuncOp func) {
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(
            i, MegDialect::kNameAttrName);
        name && name.getValue() == "loss" && ret)
      return ret.getOperand(i);
  return {};
}

struct MegRematPass : public mlir::meg::impl::MegRematBase<MegRematPass> {
  using MegRematBase::MegRematBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Level base;
    if (mode == "none")
      base = Level::None;
    else if (mode == "selective")
      base = Level::Selective;
    else if (mode == "full")
      base = Level::Full;
    else {
      module.emitError() << "meg-remat: unknown mode '" << mode
                         << "'; expected none, selective or full";
      return signalPassFailure();
    }
    // Parameters and optimizer state, per rank (sharded ones are their
    // pieces already).
    uint64_t stateBytes = 0;
    for (ParamOp param : module.getOps<ParamOp>())
      stateBytes += bytesOf(param.getTensorType());
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // A pipeline rank's program: each layer of each micro-batch's
      // forward pass recomputed in its backward pass, at the mode's level
      // (a memory budget is checked per rank after planning).
      if (auto rank = func->getAttrOfType<IntegerAttr>(
              MegDialect::kPipelineRankAttrName)) {
        // The parameters and state this rank holds: those its stage
        // updates and those every rank holds.
        uint64_t rankState = 0;
        for (ParamOp param : module.getOps<ParamOp>()) {
          auto owner = param->getAttrOfType<IntegerAttr>(
              MegDialect::kPipelineOwnerAttrName);
          if (!owner || owner.getInt() == rank.getInt())
            rankState += bytesOf(param.getTensorType());
        }
        if (failed(runOn(func, Value(), base, rankState)))
          return signalPassFailure();
        continue;
      }
      Value loss = lossOf(func);
      if (!loss)
        continue;
      if (failed(runOn(func, loss, base, stateBytes)))
        return signalPassFailure();
    }
  }

  /// A remark saying what is recomputed and why.
  void explain(func::FuncOp func, ArrayRef<Level> levels,
               ArrayRef<Level> before, size_t taken, size_t ladder,
               uint64_t peak, uint64_t unrecomputed, StringRef rungs,
               ArrayRef<int64_t> labels) {
    std::string selective, full;
    for (size_t unit = 0; unit < levels.size(); ++unit) {
      if (levels[unit] == before[unit])
        continue;
      std::string &list = levels[unit] == Level::Full ? full : selective;
      list += (list.empty() ? "" : ", ") + std::to_string(labels[unit]);
    }
    InFlightDiagnostic remark = mlir::emitRemark(func.getLoc());
    remark << "meg-remat: @" << func.getName() << " recomputes ";
    if (selective.empty() && full.empty())
      remark << "nothing more";
    if (!selective.empty())
      remark << rungs << " " << selective << " selectively";
    if (!full.empty())
      remark << (selective.empty() ? "" : " and ") << rungs << " " << full
             << " in full";
    remark << " (" << taken << " of " << ladder
           << " steps): the estimated peak " << megabytes(peak)
           << " per rank fits the budget of " << megabytes(memoryBudget)
           << "; without recomputation it would be " << megabytes(unrecomputed);
  }

  /// The analysis of `func`: of the step up to `loss`, or without one, of
  /// a pipeline rank's program.
  static std::unique_ptr<Rematerializer> analyse(func::FuncOp func,
                                                 bool pipelined) {
    return pipelined ? std::make_unique<Rematerializer>(func)
                     : std::make_unique<Rematerializer>(func, lossOf(func));
  }

  /// Recomputes `func`'s units at `base`, or under a memory budget climbs
  /// the ladder. `loss` is null for a pipeline rank's program, whose
  /// ladder moves a layer's units (one per micro-batch) together.
  LogicalResult runOn(func::FuncOp func, Value loss, Level base,
                      uint64_t stateBytes) {
    bool pipelined = !loss;
    std::unique_ptr<Rematerializer> analysis = analyse(func, pipelined);
    // A function that is all forward (the loss) has nothing to serve.
    if (!analysis->hasBackward())
      return success();
    size_t units = analysis->numUnits();
    // The ladder's rungs: each unit, or under a pipeline each layer.
    SmallVector<size_t> groupOf(units);
    size_t groups = 0;
    llvm::DenseMap<int64_t, size_t> layerGroup;
    for (size_t unit = 0; unit < units; ++unit)
      groupOf[unit] = pipelined ? layerGroup
                                      .try_emplace(analysis->layerOf(unit),
                                                   layerGroup.size())
                                      .first->second
                                : unit;
    groups = pipelined ? layerGroup.size() : units;
    // What the remark calls each rung: its unit, or its layer.
    SmallVector<int64_t> labels(groups);
    for (size_t unit = 0; unit < units; ++unit)
      labels[groupOf[unit]] =
          pipelined ? analysis->layerOf(unit) : static_cast<int64_t>(unit);
    SmallVector<Level> levels(groups, base);
    for (size_t unit = 0; unit < units; ++unit)
      if (analysis->isLossChunk(unit))
        levels[groupOf[unit]] = Level::Full;
    auto perUnit = [&](ArrayRef<Level> byGroup) {
      SmallVector<Level> result(units);
      for (size_t unit = 0; unit < units; ++unit)
        result[unit] = byGroup[groupOf[unit]];
      return result;
    };
    if (memoryBudget == 0) {
      if (base == Level::None && pipelined)
        return success();
      FailureOr<unsigned> inserted = analysis->apply(perUnit(levels));
      if (failed(inserted))
        return failure();
      numRecomputed += *inserted;
      return success();
    }
    // The estimated peak (arena plus parameters and state) at some levels,
    // on a copy of the function.
    auto estimate = [&](ArrayRef<Level> trial) -> FailureOr<uint64_t> {
      OpBuilder builder(func);
      auto copy = cast<func::FuncOp>(builder.clone(*func));
      FailureOr<unsigned> inserted =
          analyse(copy, pipelined)->apply(perUnit(trial));
      uint64_t peak = estimatePeak(copy.getBody().front());
      copy.erase();
      if (failed(inserted))
        return failure();
      return stateBytes + peak;
    };
    // The ladder: every layer in order to selective (it recomputes no
    // matrix product), then every layer in order to full. It does not
    // depend on the budget, so the steps a budget needs never grow with it.
    SmallVector<std::pair<size_t, Level>> ladder;
    for (Level target : {Level::Selective, Level::Full})
      for (size_t group = 0; group < groups; ++group)
        if (levels[group] < target)
          ladder.push_back({group, target});
    SmallVector<Level> none(levels);
    // The steps asked of this function's pipeline rank.
    size_t rank = 0;
    if (auto attr =
            func->getAttrOfType<IntegerAttr>(MegDialect::kPipelineRankAttrName))
      rank = static_cast<size_t>(attr.getInt());
    size_t leastSteps = rank < minSteps.size() ? minSteps[rank] : 0;
    FailureOr<uint64_t> unrecomputed = estimate(levels);
    if (failed(unrecomputed))
      return failure();
    FailureOr<uint64_t> peak = unrecomputed;
    size_t taken = 0;
    for (; taken < ladder.size() &&
           (*peak > memoryBudget || taken < leastSteps);
         ++taken) {
      levels[ladder[taken].first] = ladder[taken].second;
      peak = estimate(levels);
      if (failed(peak))
        return failure();
    }
    // A pipeline rank whose ladder is shorter than the steps asked of the
    // ranks takes all of it.
    if (*peak > memoryBudget || (leastSteps > ladder.size() && !pipelined)) {
      return mlir::emitError(func.getLoc())
             << "meg-remat: the memory budget of " << megabytes(memoryBudget)
             << " per rank cannot be met: with every layer recomputed, @"
             << func.getName()
             << (pipelined ? " (a pipeline rank's program)" : "") << " needs "
             << megabytes(*peak) << " (parameters and state "
             << megabytes(stateBytes) << ", activations "
             << megabytes(*peak - stateBytes) << ") at the least"
             << (units ? "" : "; the function has no meg.layer to recompute");
    }
    Builder b(func.getContext());
    func->setAttr(MegDialect::kRematStepsAttrName,
                  b.getDenseI64ArrayAttr({static_cast<int64_t>(taken),
                                          static_cast<int64_t>(ladder.size())}));
    explain(func, levels, none, taken, ladder.size(), *peak, *unrecomputed,
            pipelined ? "layers" : "units", labels);
    FailureOr<unsigned> inserted = analysis->apply(perUnit(levels));
    if (failed(inserted))
      return failure();
    numRecomputed += *inserted;
    return success();
  }
};

} // namespace
