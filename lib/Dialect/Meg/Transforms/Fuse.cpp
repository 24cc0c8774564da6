//===- Fuse.cpp - the meg-fuse pass ------------------------------------===//
//
// Producer-consumer fusion into meg.fusion regions. Groups grow upwards
// from their last op: a producer joins when it is fusible and every use of
// every result it has is already in the group, so fusing never duplicates
// work and nothing a group computes internally is needed outside it.
//
//===----------------------------------------------------------------------===//

#include "RegionBody.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGFUSE
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Work that reads each element where it writes it (with broadcasting).
bool isElementwise(Operation *op) { return op->hasTrait<Pointwise>(); }

/// Reductions whose kernels are loops over rows.
bool isRowReduction(Operation *op) { return op->hasTrait<RowReduction>(); }

/// `x + p` with `p` a matrix product (no bias) that only the add reads and
/// `x` read by nothing else, of one type: the program builder adds the
/// product into x's buffer (C += A B), which fusing the add would prevent.
bool isAccumulation(Operation *op) {
  auto add = dyn_cast<AddOp>(op);
  if (!add || add.getLhs().getType() != add.getType() ||
      add.getRhs().getType() != add.getType())
    return false;
  auto isProduct = [](Value value) {
    Operation *def = value.getDefiningOp();
    auto linear = dyn_cast_or_null<LinearOp>(def);
    return value.hasOneUse() &&
           (isa_and_nonnull<MatmulOp>(def) || (linear && !linear.getBias()));
  };
  return add.getLhs() != add.getRhs() &&
         ((isProduct(add.getRhs()) && add.getLhs().hasOneUse()) ||
          (isProduct(add.getLhs()) && add.getRhs().hasOneUse()));
}

bool isFusible(Operation *op) {
  return (isElementwise(op) || isRowReduction(op)) && !isAccumulation(op);
}

/// The records of where an op runs that fusion keeps: its layer, its
/// micro-batch, its pipeline pass.
constexpr StringLiteral kKeptAttrs[] = {MegDialect::kLayerAttrName,
                                        MegDialect::kMicroBatchAttrName,
                                        MegDialect::kPipelinePassAttrName};

/// Whether `a` and `b` may share a region: they run in no two different
/// micro-batches or pipeline passes. A region runs where its last op
/// stands, so joining an earlier micro-batch's work to a later one's would
/// keep what the earlier one made alive until then (a gradient summed over
/// the micro-batches would hold every micro-batch's gradient).
bool samePass(Operation *a, Operation *b) {
  for (StringRef name :
       {MegDialect::kMicroBatchAttrName, MegDialect::kPipelinePassAttrName}) {
    Attribute x = a->getAttr(name), y = b->getAttr(name);
    if (x && y && x != y)
      return false;
  }
  return true;
}

/// The ops of one group, grown from `root` upwards.
SmallVector<Operation *> growGroup(Operation *root,
                                   const llvm::DenseSet<Operation *> &taken) {
  llvm::SmallPtrSet<Operation *, 16> group{root};
  bool hasRowReduction = isRowReduction(root);
  SmallVector<Operation *> worklist{root};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || group.contains(producer) || taken.contains(producer) ||
          !isFusible(producer) || producer->getBlock() != root->getBlock() ||
          (hasRowReduction && isRowReduction(producer)))
        continue;
      bool allUsesInside =
          llvm::all_of(producer->getUsers(), [&](Operation *u) {
            return group.contains(u) && samePass(producer, u);
          });
      if (!allUsesInside)
        continue;
      group.insert(producer);
      hasRowReduction |= isRowReduction(producer);
      worklist.push_back(producer);
    }
  }
  SmallVector<Operation *> ordered(group.begin(), group.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// Replaces `ops` (in block order, the last one the root whose results are
/// the only ones used outside) with one meg.fusion before the root.
void outline(ArrayRef<Operation *> ops) {
  Operation *root = ops.back();
  llvm::SmallPtrSet<Operation *, 16> inside(ops.begin(), ops.end());
  SmallVector<Value> inputs;
  SmallVector<Operation *> constants;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && inside.contains(def))
        continue;
      if (def && def->hasTrait<OpTrait::ConstantLike>()) {
        if (!llvm::is_contained(constants, def))
          constants.push_back(def);
      } else if (!llvm::is_contained(inputs, operand)) {
        inputs.push_back(operand);
      }
    }

  OpBuilder builder(root);
  auto fusion =
      FusionOp::create(builder, root->getLoc(), root->getResultTypes(), inputs);
  // The layer, micro-batch and pipeline pass the fused ops run in.
  for (StringRef name : kKeptAttrs)
    if (Attribute attr = root->getAttr(name))
      fusion->setAttr(name, attr);
  IRMapping mapping;
  beginRegionBody(fusion.getBody(), inputs, constants, builder, mapping);
  for (Operation *op : ops)
    builder.clone(*op, mapping);
  SmallVector<Value> results;
  for (Value result : root->getResults())
    results.push_back(mapping.lookup(result));
  YieldOp::create(builder, root->getLoc(), results);

  root->replaceAllUsesWith(fusion->getResults());
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

/// Elementwise work horizontal fusion may join: a lone elementwise op, or a
/// fusion region without a row reduction.
bool isHorizontalCandidate(Operation *op) {
  if (isAccumulation(op))
    return false;
  if (isElementwise(op))
    return true;
  auto fusion = dyn_cast<FusionOp>(op);
  return fusion && llvm::none_of(fusion.getBody().front(), [](Operation &op) {
           return isRowReduction(&op);
         });
}

/// Whether `later` can absorb `earlier` (before it in the block): the same
/// result shape, and no use of `earlier`'s
/// results up to `later` (so `later` does not depend on it, directly or through
/// ops in between, and the merged region can stand where `later` stands).
bool canMerge(Operation *earlier, Operation *later) {
  auto shape = [](Operation *op) {
    return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  };
  if (shape(earlier) != shape(later))
    return false;
  for (Operation *user : earlier->getUsers()) {
    Operation *top = later->getBlock()->findAncestorOpInBlock(*user);
    if (!top || !later->isBeforeInBlock(top))
      return false;
  }
  return true;
}

/// Copies `op` (a fusion's body, or the op itself) into `body` with
/// `mapping`, its constants and inputs mapped already; returns the values
/// it yields.
SmallVector<Value> cloneInto(OpBuilder &builder, Operation *op,
                             IRMapping &mapping) {
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion)
    return SmallVector<Value>(builder.clone(*op, mapping)->getResults());
  Block &region = fusion.getBody().front();
  for (auto [input, arg] : llvm::zip(fusion.getInputs(), region.getArguments()))
    mapping.map(arg, mapping.lookup(input));
  for (Operation &inner : region.without_terminator())
    builder.clone(inner, mapping);
  SmallVector<Value> yielded;
  for (Value value : region.getTerminator()->getOperands())
    yielded.push_back(mapping.lookup(value));
  return yielded;
}

/// One fusion where `later` stands, computing both `earlier`'s and
/// `later`'s results.
Operation *merge(Operation *earlier, Operation *later) {
  SmallVector<Value> inputs;
  SmallVector<Operation *> constants;
  for (Operation *op : {earlier, later})
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>()) {
        if (!llvm::is_contained(constants, def))
          constants.push_back(def);
      } else if (!llvm::is_contained(inputs, operand)) {
        inputs.push_back(operand);
      }
    }
  SmallVector<Type> types(earlier->getResultTypes());
  llvm::append_range(types, later->getResultTypes());
  OpBuilder builder(later);
  auto fusion = FusionOp::create(builder, later->getLoc(), types, inputs);
  // The layer, micro-batch and pipeline pass both belong to, if they do.
  for (StringRef name : kKeptAttrs) {
    Attribute attr = later->getAttr(name);
    if (attr && attr == earlier->getAttr(name))
      fusion->setAttr(name, attr);
  }
  IRMapping mapping;
  beginRegionBody(fusion.getBody(), inputs, constants, builder, mapping);
  SmallVector<Value> yielded = cloneInto(builder, earlier, mapping);
  llvm::append_range(yielded, cloneInto(builder, later, mapping));
  YieldOp::create(builder, later->getLoc(), yielded);
  unsigned count = earlier->getNumResults();
  earlier->replaceAllUsesWith(fusion->getResults().take_front(count));
  later->replaceAllUsesWith(fusion->getResults().drop_front(count));
  earlier->erase();
  later->erase();
  return fusion;
}

/// Horizontal fusion: joins independent elementwise work over one shape
/// into one region (one kernel with several results).
void mergeHorizontally(Block &block) {
  Operation *candidate = nullptr;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (!isHorizontalCandidate(&op))
      continue;
    candidate =
        candidate && samePass(candidate, &op) && canMerge(candidate, &op)
            ? merge(candidate, &op)
            : &op;
  }
}

/// The op of type T that `op` is, or that its fusion region holds (the
/// first one), with the value outside the region that the T's operand
/// `operand` reads (null when the region computes it).
template <typename T> struct Inside {
  T op;
  Value operand(unsigned index) {
    Value value = op->getOperand(index);
    auto arg = dyn_cast<BlockArgument>(value);
    if (!fusion)
      return value;
    if (!arg || arg.getOwner() != &fusion.getBody().front())
      return nullptr;
    return fusion.getInputs()[arg.getArgNumber()];
  }
  FusionOp fusion;
};
template <typename T> std::optional<Inside<T>> findInside(Operation *op) {
  if (auto direct = dyn_cast<T>(op))
    return Inside<T>{direct, nullptr};
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion)
    return std::nullopt;
  for (Operation &inner : fusion.getBody().front())
    if (auto found = dyn_cast<T>(&inner))
      return Inside<T>{found, fusion};
  return std::nullopt;
}

/// Moves the ops between `earlier` and `later` that read `earlier`'s
/// results (directly or through each other) to just after `later`, when
/// `later` reads none of them and all are free of memory effects; returns
/// whether nothing between them reads `earlier` any more.
bool sinkUsersPast(Operation *earlier, Operation *later) {
  llvm::SetVector<Operation *> dependents;
  auto readsDependent = [&](Operation *op) {
    bool reads = false;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        reads = reads || def == earlier || dependents.contains(def);
      }
    });
    return reads;
  };
  for (Operation *op = earlier->getNextNode(); op != later;
       op = op->getNextNode())
    if (readsDependent(op))
      dependents.insert(op);
  if (readsDependent(later))
    return false;
  if (!llvm::all_of(dependents,
                    [](Operation *op) { return isMemoryEffectFree(op); }))
    return false;
  Operation *after = later;
  for (Operation *op : dependents) {
    op->moveAfter(after);
    after = op;
  }
  return true;
}

/// A cross-entropy and its gradient on the same logits and labels (the
/// gradient not reading the loss) become one region where the gradient
/// stands: one kernel, whose row statistics (max and sum of exponentials)
/// are computed once for both. Pure work between them that reads the loss
/// moves after the region.
void mergeLossWithGradient(Block &block) {
  SmallVector<Operation *> losses;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (std::optional<Inside<CrossEntropyOp>> loss =
            findInside<CrossEntropyOp>(&op)) {
      // A loss over chunks of tokens keeps its gradient apart, where the
      // chunk's logits are recomputed: one chunk's logits live at a time.
      if (!loss->op->hasAttr(MegDialect::kLossChunkAttrName))
        losses.push_back(&op);
      continue;
    }
    std::optional<Inside<CrossEntropyGradOp>> grad =
        findInside<CrossEntropyGradOp>(&op);
    if (!grad)
      continue;
    for (Operation *&candidate : losses) {
      if (!candidate)
        continue;
      Inside<CrossEntropyOp> loss = *findInside<CrossEntropyOp>(candidate);
      Value logits = loss.operand(0), labels = loss.operand(1);
      if (!logits || logits != grad->operand(1) || labels != grad->operand(2) ||
          loss.op.getReduction() != grad->op.getReduction() ||
          loss.op.getIgnoreIndex() != grad->op.getIgnoreIndex() ||
          !sinkUsersPast(candidate, &op))
        continue;
      merge(candidate, &op);
      candidate = nullptr;
      break;
    }
  }
}

struct MegFusePass : public mlir::meg::impl::MegFuseBase<MegFusePass> {
  using MegFuseBase::MegFuseBase;

  void runOnOperation() override {
    llvm::DenseSet<Operation *> taken;
    SmallVector<SmallVector<Operation *>> groups;
    for (Block &block : getOperation().getBody()) {
      SmallVector<Operation *> ops;
      for (Operation &op : block)
        ops.push_back(&op);
      for (Operation *op : llvm::reverse(ops)) {
        if (!isFusible(op) || taken.contains(op))
          continue;
        SmallVector<Operation *> group = growGroup(op, taken);
        taken.insert(group.begin(), group.end());
        if (group.size() > 1)
          groups.push_back(std::move(group));
      }
    }
    for (ArrayRef<Operation *> group : groups)
      outline(group);
    for (Block &block : getOperation().getBody()) {
      mergeLossWithGradient(block);
      mergeHorizontally(block);
    }
  }
};

} // namespace
