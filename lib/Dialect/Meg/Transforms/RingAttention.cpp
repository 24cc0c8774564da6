//===- RingAttention.cpp - the meg-ring-attention pass -------------------===//
//
// Expands `meg.ring_attention` and its gradient into the ring's steps. The
// ranks of a context-parallel group (C ranks) each hold two chunks of the
// sequence (rank i: chunks i and 2C - 1 - i of 2C). Step 0 attends to the
// rank's own keys causally; step s to the block of the rank s places back,
// which `meg.shift` passes on, with each query's position in that block
// (a constant per rank: the whole block's first chunk for an earlier rank,
// the whole block for the second query chunk only for a later one), and
// its partial result joins the running one by their log-sum-exp
// statistics. The gradient passes the blocks around again, given the
// forward's output and statistics; each block's key and value gradients
// gather from the rank after its own around to its own.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ScopeExit.h"

#include <algorithm>
#include <map>
#include <memory>

namespace mlir::meg {
#define GEN_PASS_DEF_MEGRINGATTENTION
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Gives every op it sees inserted the attributes of the op it expands
/// (its layer, recomputation marks).
struct AttributeCopier : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    for (NamedAttribute attr : attrs)
      op->setAttr(attr.getName(), attr.getValue());
  }
  SmallVector<NamedAttribute> attrs;
};

/// How the queries of each rank see the block of keys of the rank `step`
/// places back: per rank, per query, the last key it sees (-1: none).
SmallVector<int32_t> blockPositions(int64_t ranks, int64_t chunk,
                                    int64_t step) {
  int64_t chunks = 2 * ranks;
  // The number of keys of chunk c that a query at position p sees.
  auto seen = [&](int64_t p, int64_t c) {
    return std::clamp<int64_t>(p - c * chunk + 1, 0, chunk);
  };
  SmallVector<int32_t> positions;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    int64_t block = ((rank - step) % ranks + ranks) % ranks;
    for (int64_t c : {rank, chunks - 1 - rank})
      for (int64_t t = 0; t < chunk; ++t) {
        int64_t p = c * chunk + t;
        positions.push_back(static_cast<int32_t>(
            seen(p, block) + seen(p, chunks - 1 - block) - 1));
      }
  }
  return positions;
}

/// The expansion of the ring ops of one function.
class RingExpander {
public:
  RingExpander(func::FuncOp func, int64_t ranks, FlatSymbolRefAttr mesh,
               ArrayAttr axes)
      : func(func), ranks(ranks), mesh(mesh), axes(axes),
        builder(func.getContext()) {}

  void expand(RingAttentionOp ring);
  LogicalResult expand(RingAttentionGradOp grad);

private:
  /// This rank's piece of a per-rank constant laid out rank by rank.
  template <typename T> Value perRank(ArrayRef<T> values, Type element);
  /// The block positions of step s (s > 0) for this rank.
  Value positions(int64_t step, int64_t chunk);
  /// 1 for the queries that see a key of step s's block, else 0; and 0 or
  /// -kFar for them.
  std::pair<Value, Value> seesMask(int64_t step, int64_t chunk);
  Value splat(RankedTensorType type, double value) {
    return arith::ConstantOp::create(
        builder, func.getLoc(), type,
        DenseElementsAttr::get(
            type, builder.getFloatAttr(type.getElementType(), value)));
  }
  Value shift(Value value) {
    return ShiftOp::create(builder, value.getLoc(), value, mesh, axes,
                           builder.getI64IntegerAttr(1));
  }
  Value castTo(Value value, Type element) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == element)
      return value;
    return CastOp::create(builder, value.getLoc(), type.clone(element), value);
  }
  /// Joins the partial result `out` (statistics `lse`) of a block into the
  /// running `acc` (f32) and `running` statistics.
  void merge(Value &acc, Value &running, Value out, Value lse, int64_t step,
             int64_t chunk);

  /// A finite stand-in for the statistics of the queries that see no key.
  static constexpr double kFar = 1e30;

  func::FuncOp func;
  int64_t ranks;
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  OpBuilder builder;
  AttributeCopier copier;
  /// Constants at the function's entry, shared by every ring.
  DenseMap<int64_t, Value> positionsOf;
  DenseMap<int64_t, std::pair<Value, Value>> masksOf;
  /// The statistics of each expanded forward, for its gradient.
  DenseMap<Value, Value> statsOf;
};

template <typename T>
Value RingExpander::perRank(ArrayRef<T> values, Type element) {
  // At the function's entry, in no layer.
  OpBuilder::InsertionGuard guard(builder);
  OpBuilder::Listener *listener = builder.getListener();
  builder.setListener(nullptr);
  auto restore = llvm::make_scope_exit([&] { builder.setListener(listener); });
  builder.setInsertionPointToStart(&func.getBody().front());
  auto type =
      RankedTensorType::get({static_cast<int64_t>(values.size())}, element);
  Value all = arith::ConstantOp::create(builder, func.getLoc(), type,
                                        DenseElementsAttr::get(type, values));
  return ShardSliceOp::create(
      builder, func.getLoc(),
      RankedTensorType::get({static_cast<int64_t>(values.size()) / ranks},
                            element),
      all, mesh, axes, builder.getI64IntegerAttr(0));
}

Value RingExpander::positions(int64_t step, int64_t chunk) {
  Value &cached = positionsOf[step];
  if (!cached) {
    SmallVector<int32_t> values = blockPositions(ranks, chunk, step);
    cached = perRank(ArrayRef<int32_t>(values), builder.getI32Type());
  }
  return cached;
}

std::pair<Value, Value> RingExpander::seesMask(int64_t step, int64_t chunk) {
  std::pair<Value, Value> &cached = masksOf[step];
  if (!cached.first) {
    SmallVector<float> sees, far;
    for (int32_t last : blockPositions(ranks, chunk, step)) {
      sees.push_back(last >= 0 ? 1.0f : 0.0f);
      far.push_back(last >= 0 ? 0.0f : static_cast<float>(-kFar));
    }
    cached = {perRank(ArrayRef<float>(sees), builder.getF32Type()),
              perRank(ArrayRef<float>(far), builder.getF32Type())};
  }
  return cached;
}

void RingExpander::merge(Value &acc, Value &running, Value out, Value lse,
                         int64_t step, int64_t chunk) {
  Location loc = lse.getLoc();
  auto statsType = cast<RankedTensorType>(lse.getType());
  // A query that sees no key of the block has statistics +-inf and a zero
  // result: its statistics become -kFar (a weight of exactly 0), the
  // others stay as they are.
  auto [sees, far] = seesMask(step, chunk);
  Value low = splat(statsType, -kFar);
  Value clamped = MaxOp::create(builder, loc, lse, low);
  clamped = NegOp::create(
      builder, loc,
      MaxOp::create(builder, loc, NegOp::create(builder, loc, clamped), low));
  Value block = AddOp::create(builder, loc,
                              MulOp::create(builder, loc, clamped, sees), far);
  // The log-sum-exp of both, and each side's share of it.
  Value top = MaxOp::create(builder, loc, running, block);
  Value mine =
      ExpOp::create(builder, loc, SubOp::create(builder, loc, running, top));
  Value theirs =
      ExpOp::create(builder, loc, SubOp::create(builder, loc, block, top));
  Value total = AddOp::create(builder, loc, mine, theirs);
  running =
      AddOp::create(builder, loc, top, LogOp::create(builder, loc, total));
  // [B, H, S] shares onto the [B, S, H, Dv] results.
  auto onRows = [&](Value share) -> Value {
    Value moved = TransposeOp::create(builder, loc, share,
                                      builder.getDenseI64ArrayAttr({0, 2, 1}));
    ArrayRef<int64_t> shape = statsType.getShape();
    auto rowType = RankedTensorType::get({shape[0], shape[2], shape[1], 1},
                                         builder.getF32Type());
    return ReshapeOp::create(builder, loc, rowType, moved);
  };
  Value keep = onRows(DivOp::create(builder, loc, mine, total));
  Value take = onRows(DivOp::create(builder, loc, theirs, total));
  acc = AddOp::create(
      builder, loc, MulOp::create(builder, loc, acc, keep),
      MulOp::create(builder, loc, castTo(out, builder.getF32Type()), take));
}

void RingExpander::expand(RingAttentionOp ring) {
  copier.attrs = llvm::to_vector(ring->getDiscardableAttrs());
  builder.setListener(&copier);
  builder.setInsertionPoint(ring);
  Location loc = ring.getLoc();
  int64_t chunk =
      cast<RankedTensorType>(ring.getQuery().getType()).getDimSize(1) / 2;
  auto own = AttentionOp::create(builder, loc, ring.getQuery(), ring.getKey(),
                                 ring.getValue(), /*positions=*/Value(),
                                 builder.getUnitAttr(), ring.getScaleAttr(),
                                 builder.getUnitAttr());
  Value acc = castTo(own.getResult(), builder.getF32Type());
  Value running = own.getStats();
  Value key = ring.getKey(), value = ring.getValue();
  for (int64_t step = 1; step < ranks; ++step) {
    key = shift(key);
    value = shift(value);
    auto block = AttentionOp::create(
        builder, loc, ring.getQuery(), key, value, positions(step, chunk),
        builder.getUnitAttr(), ring.getScaleAttr(), builder.getUnitAttr());
    merge(acc, running, block.getResult(), block.getStats(), step, chunk);
  }
  Value result =
      castTo(acc, cast<RankedTensorType>(ring.getType()).getElementType());
  builder.setListener(nullptr);
  ring.getResult().replaceAllUsesWith(result);
  statsOf[result] = running;
  ring.erase();
}

LogicalResult RingExpander::expand(RingAttentionGradOp grad) {
  Value stats = statsOf.lookup(grad.getOutput());
  if (!stats)
    return grad.emitError()
           << "meg-ring-attention: the output this gradient reads is not a "
              "meg.ring_attention's of the same function";
  copier.attrs = llvm::to_vector(grad->getDiscardableAttrs());
  builder.setListener(&copier);
  builder.setInsertionPoint(grad);
  Location loc = grad.getLoc();
  int64_t chunk =
      cast<RankedTensorType>(grad.getQuery().getType()).getDimSize(1) / 2;
  auto gradOf = [&](Value key, Value value, Value positions) {
    return AttentionGradOp::create(builder, loc, grad.getGrad(),
                                   grad.getQuery(), key, value,
                                   grad.getOutput(), stats, positions,
                                   builder.getUnitAttr(), grad.getScaleAttr());
  };
  auto own = gradOf(grad.getKey(), grad.getValue(), Value());
  Value queryGrad = own.getQueryGrad();
  // The gradients of a block gather on the way from the rank after its
  // own (step 1) around to its own: C - 1 shifts, as many as the block
  // itself takes.
  Value keyGrad, valueGrad;
  Value key = grad.getKey(), value = grad.getValue();
  for (int64_t step = 1; step < ranks; ++step) {
    key = shift(key);
    value = shift(value);
    if (keyGrad) {
      keyGrad = shift(keyGrad);
      valueGrad = shift(valueGrad);
    }
    auto block = gradOf(key, value, positions(step, chunk));
    queryGrad = AddOp::create(builder, loc, queryGrad, block.getQueryGrad());
    keyGrad = keyGrad ? AddOp::create(builder, loc, keyGrad, block.getKeyGrad())
                      : block.getKeyGrad();
    valueGrad =
        valueGrad ? AddOp::create(builder, loc, valueGrad, block.getValueGrad())
                  : block.getValueGrad();
  }
  // After step C - 1 a rank holds the gradients of the block of the rank
  // after it, whole but for that rank's own share.
  if (keyGrad) {
    keyGrad = AddOp::create(builder, loc, shift(keyGrad), own.getKeyGrad());
    valueGrad =
        AddOp::create(builder, loc, shift(valueGrad), own.getValueGrad());
  } else {
    keyGrad = own.getKeyGrad();
    valueGrad = own.getValueGrad();
  }
  builder.setListener(nullptr);
  grad.getQueryGrad().replaceAllUsesWith(queryGrad);
  grad.getKeyGrad().replaceAllUsesWith(keyGrad);
  grad.getValueGrad().replaceAllUsesWith(valueGrad);
  grad.erase();
  return success();
}

struct MegRingAttentionPass
    : public mlir::meg::impl::MegRingAttentionBase<MegRingAttentionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<Operation *> rings;
      func.walk([&](Operation *op) {
        if (isa<RingAttentionOp, RingAttentionGradOp>(op))
          rings.push_back(op);
      });
      // One expander per group (a function has one in practice).
      std::map<std::pair<const void *, const void *>,
               std::unique_ptr<RingExpander>>
          expanders;
      auto expanderOf = [&](Operation *op, FlatSymbolRefAttr mesh,
                            ArrayAttr axes) -> RingExpander * {
        auto &slot =
            expanders[{mesh.getAsOpaquePointer(), axes.getAsOpaquePointer()}];
        if (!slot) {
          FailureOr<int64_t> ranks =
              SubmeshOp::verifyGroup(op, symbols, mesh, axes);
          if (failed(ranks))
            return nullptr;
          slot = std::make_unique<RingExpander>(func, *ranks, mesh, axes);
        }
        return slot.get();
      };
      // Forwards first (in order), so that each gradient finds its
      // forward's statistics.
      for (Operation *op : rings)
        if (auto ring = dyn_cast<RingAttentionOp>(op)) {
          RingExpander *expander =
              expanderOf(op, ring.getMeshAttr(), ring.getAxesAttr());
          if (!expander)
            return signalPassFailure();
          expander->expand(ring);
          ++numRings;
        }
      for (Operation *op : rings)
        if (auto grad = dyn_cast<RingAttentionGradOp>(op)) {
          RingExpander *expander =
              expanderOf(op, grad.getMeshAttr(), grad.getAxesAttr());
          if (!expander || failed(expander->expand(grad)))
            return signalPassFailure();
        }
    }
  }
};

} // namespace
