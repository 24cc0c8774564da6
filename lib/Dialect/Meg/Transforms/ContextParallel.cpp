//===- ContextParallel.cpp - the meg-context-parallel pass ---------------===//
//
// Splits every sequence of a model written for one device over the
// context-parallel group of its `meg.context_parallel` (C ranks): the
// sequence is cut into 2C chunks and rank i holds chunks i and 2C - 1 - i
// (the "cp order" of the chunks is 0, 2C-1, 1, 2C-2, ...; rank i holds
// the i-th pair), so that every rank does the same share of causal
// attention. Entry inputs stay the whole samples; the token sequences the
// model reads (the ids of an embedding, the labels of a loss) are sliced
// into this rank's chunks where they enter, and the split follows the data.
// Attention gathers the keys and values over the group in the original
// order and masks by each query's position, or (`attention = ring`) passes
// them around the group (`meg.ring_attention`); entry results with a split
// sequence are gathered back into the original order.
//
// Over 600 lines: one layout walk whose per-op rules (elementwise,
// reshapes, products, reductions, experts, attention) share the split
// values' map and the chunk reorderings; a file per rule would expose both.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "GroupRewrites.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::meg {
#define GEN_PASS_DEF_MEGCONTEXTPARALLEL
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// `type` with dimension `dim` divided by `parts`.
RankedTensorType divided(Type type, int64_t dim, int64_t parts) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[dim] /= parts;
  return tensor.clone(shape);
}

/// The chunk at place `place` of cp order (0, 2C-1, 1, 2C-2, ...: rank i
/// holds places 2i and 2i + 1) of `chunks` = 2C chunks.
int64_t cpChunk(int64_t place, int64_t chunks) {
  return place % 2 == 0 ? place / 2 : chunks - 1 - place / 2;
}

/// The split of one function: which values hold this rank's chunks, and
/// along which dimension.
class ContextParallelLayout {
public:
  ContextParallelLayout(ContextParallelAttr config, int64_t ranks)
      : config(config), ranks(ranks), builder(config.getContext()) {
    builder.setListener(&tagger);
  }

  LogicalResult layOut(func::FuncOp func);
  /// Values gathered whole for an entry's results.
  int64_t numGathered = 0;
  int64_t numAttentions = 0;
  /// Token sequences the functions read, cut into this rank's chunks.
  int64_t numSequences = 0;

private:
  InFlightDiagnostic error(Operation *op) {
    return op->emitError() << "meg-context-parallel: ";
  }
  void buildAt(Operation *anchor) { tagger.at(builder, anchor); }
  void buildAfterValue(Value value) { tagger.afterValue(builder, value); }
  std::optional<int64_t> splitDim(Value value) const {
    auto it = dims.find(value);
    return it == dims.end() ? std::nullopt : std::optional(it->second);
  }
  void split(Value value, int64_t dim) {
    dims[value] = dim;
    value.setType(divided(value.getType(), dim, ranks));
  }
  /// The whole extent of a split value's split dimension.
  int64_t wholeExtent(Value value) const {
    return cast<RankedTensorType>(value.getType())
               .getDimSize(*splitDim(value)) *
           ranks;
  }
  /// For a split dimension that merges dimensions (the batch and the
  /// sequence into tokens, an expert and its slots into rows), the whole
  /// extent of its innermost one, which holds the split; 0 otherwise.
  int64_t innerOf(Value value) const { return inners.lookup(value); }
  /// Results split along a dimension of the same extent as a split
  /// operand's merged one take its inner extent, unless the rule said.
  void inheritInner(Operation *op);

  /// Reorders the 2C chunks along dim 0 of a whole value: into cp order
  /// (`toCp`), or from cp order back to the original one.
  Value reorderRows(Value value, bool toCp);
  /// This rank's chunks along `dim` of a whole value.
  Value localChunks(Value whole, int64_t dim);
  /// This rank's chunks of a whole value along `dim` (once per value).
  FailureOr<Value> sliced(Value whole, int64_t dim, Operation *user);
  /// The whole value, in the original order, of a split one. With
  /// `partialGradient` every rank uses it differently (attention's keys and
  /// values), so that its gradient is the sum of the ranks'.
  Value gathered(Value value, int64_t dim, bool partialGradient = false);
  /// Each of this rank's tokens' positions in the sequence, [S / C] i32.
  Value positions(func::FuncOp func);
  /// Starts the split at the sequences the model reads.
  LogicalResult seed(func::FuncOp func);
  /// Checks and records the sequence length.
  LogicalResult sequenceOf(Operation *op, int64_t extent);

  LogicalResult visit(Operation *op, func::FuncOp func);
  LogicalResult visitOp(Operation *op, func::FuncOp func);
  LogicalResult visitElementwise(Operation *op);
  LogicalResult visitReshape(ReshapeOp reshape, int64_t dim);
  LogicalResult visitMatmul(MatmulOp matmul);
  LogicalResult visitReduce(ReduceOp reduce);
  LogicalResult visitMoe(Operation *op);
  LogicalResult visitAttention(AttentionOp attention, func::FuncOp func);

  ContextParallelAttr config;
  int64_t ranks;
  OpBuilder builder;
  LayerTagger tagger;
  /// The whole sequence, once an input gives it.
  int64_t sequence = 0;
  // Per function.
  DenseMap<Value, int64_t> dims;
  DenseMap<Value, int64_t> inners;
  DenseMap<std::pair<Value, int64_t>, Value> slices;
  /// Keys and values gathered for attention (once per value).
  DenseMap<Value, Value> gathers;
  Value localPositions;
};

Value ContextParallelLayout::reorderRows(Value value, bool toCp) {
  if (ranks == 1)
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  int64_t rows = type.getDimSize(0), chunks = 2 * ranks,
          chunk = rows / chunks;
  // The place in cp order of chunk c.
  auto cpPlace = [&](int64_t c) {
    return c < ranks ? 2 * c : 2 * (chunks - 1 - c) + 1;
  };
  // Row r of the result is row source(r) of the value.
  auto source = [&](int64_t r) {
    int64_t from = toCp ? cpChunk(r / chunk, chunks) : cpPlace(r / chunk);
    return from * chunk + r % chunk;
  };
  Location loc = value.getLoc();
  if (isa<FloatType>(type.getElementType())) {
    // One gather of rows, whose gradient is the inverse one.
    int64_t width = type.getNumElements() / rows;
    auto flatType = RankedTensorType::get({rows, width}, type.getElementType());
    Value flat = flatType == type
                     ? value
                     : ReshapeOp::create(builder, loc, flatType, value);
    auto indexType = RankedTensorType::get({rows}, builder.getI32Type());
    auto inverseType = RankedTensorType::get({rows, 1}, builder.getI32Type());
    SmallVector<int32_t> index(rows), inverse(rows);
    for (int64_t r = 0; r < rows; ++r) {
      index[r] = static_cast<int32_t>(source(r));
      inverse[source(r)] = static_cast<int32_t>(r);
    }
    Value indexValue = arith::ConstantOp::create(
        builder, loc, indexType,
        DenseElementsAttr::get(indexType, ArrayRef<int32_t>(index)));
    Value inverseValue = arith::ConstantOp::create(
        builder, loc, inverseType,
        DenseElementsAttr::get(inverseType, ArrayRef<int32_t>(inverse)));
    Value moved = GatherRowsOp::create(builder, loc, flatType, flat,
                                       indexValue, inverseValue);
    return flatType == type ? moved
                            : ReshapeOp::create(builder, loc, type, moved);
  }
  // Integers (token ids and labels, no gradient): one slice per chunk.
  SmallVector<Value> pieces;
  SmallVector<int64_t> offsets(type.getRank(), 0), sizes(type.getShape()),
      strides(type.getRank(), 1);
  sizes[0] = chunk;
  for (int64_t p = 0; p < chunks; ++p) {
    offsets[0] = source(p * chunk);
    pieces.push_back(SliceOp::create(builder, loc, value,
                                     builder.getDenseI64ArrayAttr(offsets),
                                     builder.getDenseI64ArrayAttr(sizes),
                                     builder.getDenseI64ArrayAttr(strides)));
  }
  return ConcatOp::create(builder, loc, pieces, builder.getI64IntegerAttr(0));
}

Value ContextParallelLayout::localChunks(Value whole, int64_t dim) {
  return alongDim(builder, whole, dim, 1, ranks,
                  [&](Value moved, Type type) -> Value {
                    return ShardSliceOp::create(
                        builder, whole.getLoc(), type,
                        reorderRows(moved, /*toCp=*/true), config.getMesh(),
                        config.getAxes(), builder.getI64IntegerAttr(0));
                  });
}

FailureOr<Value> ContextParallelLayout::sliced(Value whole, int64_t dim,
                                               Operation *user) {
  auto it = slices.find({whole, dim});
  if (it != slices.end())
    return it->second;
  // A whole value that a parameter feeds (a learned position table) would
  // need its gradient's pieces summed, not gathered; none of the models
  // has one yet.
  SetVector<Operation *> sources;
  SmallVector<Value> pending = {whole};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def)
      return error(user) << "operand is a whole sequence that comes from a "
                            "function argument, not from the sequences the "
                            "model splits";
    if (isa<ParamRefOp>(def))
      return error(user) << "a sequence-long value computed from parameter "
                         << cast<ParamRefOp>(def).getNameAttr()
                         << " meets the split sequence; only "
                            "parameter-free ones (positions, RoPE tables) "
                            "are sliced";
    if (sources.insert(def))
      llvm::append_range(pending, def->getOperands());
  }
  buildAfterValue(whole);
  Value local = localChunks(whole, dim);
  slices[{whole, dim}] = local;
  dims[local] = dim;
  return local;
}

Value ContextParallelLayout::gathered(Value value, int64_t dim,
                                      bool partialGradient) {
  if (partialGradient)
    if (Value whole = gathers.lookup(value))
      return whole;
  Value whole = alongDim(
      builder, value, dim, ranks, 1, [&](Value moved, Type type) -> Value {
        Value cpOrder = AllGatherOp::create(builder, value.getLoc(), type,
                                            moved, config.getMesh(),
                                            config.getAxes(),
                                            builder.getI64IntegerAttr(0));
        // Each rank's use contributes part of the gradient: summed over
        // the group before each rank takes its piece (a reduce-scatter).
        if (partialGradient)
          cpOrder = CopyToGroupOp::create(builder, value.getLoc(), cpOrder,
                                          config.getMesh(), config.getAxes());
        return reorderRows(cpOrder, /*toCp=*/false);
      });
  if (partialGradient)
    gathers[value] = whole;
  return whole;
}

Value ContextParallelLayout::positions(func::FuncOp func) {
  if (localPositions)
    return localPositions;
  Block &entry = func.getBody().front();
  tagger.layer = {};
  builder.setInsertionPointToStart(&entry);
  // The positions in cp order: the chunks 0, 2C-1, 1, 2C-2, ...
  auto type = RankedTensorType::get({sequence}, builder.getI32Type());
  int64_t chunks = 2 * ranks, chunk = sequence / chunks;
  SmallVector<int32_t> values;
  for (int64_t p = 0; p < chunks; ++p) {
    int64_t c = cpChunk(p, chunks);
    for (int64_t i = 0; i < chunk; ++i)
      values.push_back(static_cast<int32_t>(c * chunk + i));
  }
  Value cpOrder = arith::ConstantOp::create(
      builder, func.getLoc(), type,
      DenseElementsAttr::get(type, ArrayRef<int32_t>(values)));
  localPositions = ShardSliceOp::create(
      builder, func.getLoc(), divided(type, 0, ranks), cpOrder,
      config.getMesh(), config.getAxes(), builder.getI64IntegerAttr(0));
  return localPositions;
}

LogicalResult ContextParallelLayout::sequenceOf(Operation *op, int64_t extent) {
  if (sequence == 0) {
    if (extent % (2 * ranks) != 0)
      return error(op) << "the sequence of " << extent
                       << " tokens does not split into 2 x " << ranks << " = "
                       << 2 * ranks
                       << " equal chunks (each context-parallel rank holds "
                          "two, for causal load balancing)";
    sequence = extent;
    return success();
  }
  if (extent != sequence)
    return error(op) << "reads a sequence of " << extent
                     << " tokens, where another input has " << sequence;
  return success();
}

LogicalResult ContextParallelLayout::seed(func::FuncOp func) {
  SmallVector<std::pair<BlockArgument, Operation *>> seeds;
  func.walk([&](Operation *op) {
    Value tokens;
    if (auto embedding = dyn_cast<EmbeddingOp>(op))
      tokens = embedding.getIds();
    else if (auto loss = dyn_cast<CrossEntropyOp>(op))
      tokens = loss.getLabels();
    else if (auto count = dyn_cast<LabelCountOp>(op))
      tokens = count.getLabels();
    if (auto arg = dyn_cast_or_null<BlockArgument>(tokens))
      seeds.push_back({arg, op});
  });
  DenseSet<Value> seeded;
  for (auto [arg, user] : seeds) {
    if (!seeded.insert(arg).second)
      continue;
    // Every use reads this rank's chunks; the argument stays the whole
    // samples.
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getRank() == 0)
      return error(user) << "reads a scalar where a token sequence belongs";
    int64_t dim = type.getRank() - 1;
    if (failed(sequenceOf(user, type.getDimSize(dim))))
      return failure();
    SmallVector<OpOperand *> uses;
    SmallVector<LabelCountOp> counts;
    for (OpOperand &use : arg.getUses()) {
      if (auto count = dyn_cast<LabelCountOp>(use.getOwner()))
        counts.push_back(count);
      else
        uses.push_back(&use);
    }
    // A label count stays that of the whole samples (meg-optimizer counts
    // the labels of a step's micro-batches from the entry's input), scaled
    // by 1/C: its mean over the data-parallel group, which holds the
    // context axes, is then the mean of the ranks' own counts.
    for (LabelCountOp count : counts) {
      tagger.after(builder, count);
      auto type = cast<RankedTensorType>(count.getType());
      Value factor = arith::ConstantOp::create(
          builder, count.getLoc(), type,
          DenseElementsAttr::get(
              type, builder.getFloatAttr(type.getElementType(),
                                         1.0 / static_cast<double>(ranks))));
      auto scaled = MulOp::create(builder, count.getLoc(), count, factor);
      count.getResult().replaceAllUsesExcept(scaled, scaled);
    }
    tagger.layer = {};
    builder.setInsertionPointToStart(arg.getOwner());
    Value local = localChunks(arg, dim);
    for (OpOperand *use : uses)
      use->set(local);
    dims[local] = dim;
  }
  return success();
}

/// Ops with the Elementwise trait (NumPy broadcasting): the result is split
/// where a split operand is; whole operands broadcast along it (extent 1)
/// or are sliced into this rank's chunks.
LogicalResult ContextParallelLayout::visitElementwise(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = type.getRank();
  std::optional<int64_t> result;
  for (Value operand : op->getOperands()) {
    std::optional<int64_t> dim = splitDim(operand);
    if (!dim)
      continue;
    int64_t aligned =
        *dim + rank - cast<RankedTensorType>(operand.getType()).getRank();
    if (result && *result != aligned)
      return error(op) << "operands split the sequence along different "
                          "dimensions ("
                       << *result << " and " << aligned << ")";
    result = aligned;
  }
  for (OpOperand &operand : op->getOpOperands()) {
    if (splitDim(operand.get()))
      continue;
    auto operandType = cast<RankedTensorType>(operand.get().getType());
    int64_t dim = *result - (rank - operandType.getRank());
    if (dim < 0 || operandType.getDimSize(dim) == 1)
      continue;
    if (operandType.getDimSize(dim) != sequence)
      return error(op) << "operand #" << operand.getOperandNumber()
                       << " has extent " << operandType.getDimSize(dim)
                       << " along the split sequence of " << sequence;
    FailureOr<Value> local = sliced(operand.get(), dim, op);
    if (failed(local))
      return failure();
    operand.set(*local);
  }
  for (Value value : op->getResults())
    split(value, *result);
  return success();
}

/// The split dimension of the reshape's result. A reshape may merge the
/// split dimension with the dimensions before it (the batch and the
/// sequence into tokens: the rows of this rank are its tokens, batch by
/// batch; an expert's slots into rows) or split such a merged dimension
/// back, the sequence innermost.
LogicalResult ContextParallelLayout::visitReshape(ReshapeOp reshape,
                                                  int64_t dim) {
  auto in = cast<RankedTensorType>(reshape.getInput().getType());
  ArrayRef<int64_t> out = reshape.getType().getShape();
  SmallVector<int64_t> whole(in.getShape());
  whole[dim] *= ranks;
  // Elements before each dimension, of the input and of the result.
  SmallVector<int64_t> inBefore(whole.size() + 1, 1),
      outBefore(out.size() + 1, 1);
  for (size_t d = 0; d < whole.size(); ++d)
    inBefore[d + 1] = inBefore[d] * whole[d];
  for (size_t d = 0; d < out.size(); ++d)
    outBefore[d + 1] = outBefore[d] * out[d];
  int64_t before = inBefore[dim], through = inBefore[dim + 1];
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    // The result dimension ends where the split one does and starts at an
    // input dimension's start: it merges the split one with those before.
    if (outBefore[d + 1] == through && outBefore[d] <= before &&
        llvm::is_contained(ArrayRef(inBefore).take_front(dim + 1),
                           outBefore[d])) {
      split(reshape.getResult(), d);
      int64_t inner = innerOf(reshape.getInput());
      inners[reshape.getResult()] =
          outBefore[d] == before && !inner ? 0 : (inner ? inner : whole[dim]);
      return success();
    }
    // A merged dimension split back, its innermost part the split one.
    int64_t inner = innerOf(reshape.getInput());
    if (inner && outBefore[d] > before && outBefore[d + 1] == through &&
        out[d] == inner) {
      split(reshape.getResult(), d);
      inners[reshape.getResult()] = 0;
      return success();
    }
  }
  return error(reshape) << "reshapes the split sequence (dim " << dim << ", "
                        << whole[dim] << " elements) into " << reshape.getType()
                        << ", which does not keep it a dimension";
}

/// A matrix product of a split left-hand side by a whole right-hand side:
/// the split stays on the rows or the batch dimension it is on.
LogicalResult ContextParallelLayout::visitMatmul(MatmulOp matmul) {
  if (splitDim(matmul.getRhs()))
    return error(matmul) << "multiplies by a right-hand side split along the "
                            "sequence";
  int64_t dim = *splitDim(matmul.getLhs());
  int64_t rank = cast<RankedTensorType>(matmul.getLhs().getType()).getRank();
  int64_t outRank = matmul.getType().getRank();
  int64_t contracted = matmul.getTransposeLhs() ? rank - 2 : rank - 1;
  if (dim == contracted)
    return error(matmul) << "contracts over the split sequence";
  split(matmul.getResult(),
        dim < rank - 2 ? dim + outRank - rank : outRank - 2);
  return success();
}

/// A reduction that keeps the split dimension stays split; a sum over it
/// adds up the ranks' partial sums (and the gradient of that total, used
/// by every rank, is the sum of the ranks' gradients).
LogicalResult ContextParallelLayout::visitReduce(ReduceOp reduce) {
  int64_t dim = *splitDim(reduce.getInput());
  ArrayRef<int64_t> reduced = reduce.getDims();
  if (!llvm::is_contained(reduced, dim)) {
    int64_t removed =
        reduce.getKeepDims()
            ? 0
            : llvm::count_if(reduced, [&](int64_t d) { return d < dim; });
    split(reduce.getResult(), dim - removed);
    return success();
  }
  if (reduce.getKind() != ReduceKind::sum)
    return error(reduce) << "reduces over the split sequence by "
                         << stringifyReduceKind(reduce.getKind())
                         << " (only a sum adds up over the ranks)";
  tagger.after(builder, reduce);
  auto add =
      CollectiveReduceAttr::get(builder.getContext(), CollectiveReduce::sum);
  Value total = AllReduceOp::create(builder, reduce.getLoc(), reduce.getType(),
                                    reduce.getResult(), config.getMesh(),
                                    config.getAxes(), add);
  Value shared = CopyToGroupOp::create(builder, reduce.getLoc(), total,
                                       config.getMesh(), config.getAxes());
  reduce.getResult().replaceAllUsesExcept(shared, total.getDefiningOp());
  return success();
}

/// Mixture-of-experts routing of this rank's tokens: the router's choices
/// per token, the experts' slots (the capacity of each expert's slots on
/// a rank is its share, 1/C of the whole's), and the gathers between the
/// tokens and the slots. The loads and the dropped count are this rank's:
/// meg-optimizer sums the loads over the data-parallel group, which holds
/// the context axes.
LogicalResult ContextParallelLayout::visitMoe(Operation *op) {
  if (auto route = dyn_cast<MoeRouteOp>(op)) {
    if (splitDim(route.getBias()) || splitDim(route.getScores()) != 0)
      return error(op) << "expects the scores of this rank's tokens (split "
                          "along dim 0) and a whole bias";
    split(route.getExperts(), 0);
    split(route.getWeights(), 0);
    return success();
  }
  if (auto assign = dyn_cast<MoeAssignOp>(op)) {
    if (splitDim(assign.getExperts()) != 0 ||
        splitDim(assign.getWeights()) != 0)
      return error(op) << "expects the choices of this rank's tokens (split "
                          "along dim 0)";
    int64_t capacity = assign.getCapacity();
    if (capacity % ranks != 0)
      return error(op) << "an expert's capacity of " << capacity
                       << " slots does not split over the " << ranks
                       << " context-parallel ranks";
    assign.setCapacity(capacity / ranks);
    split(assign.getSlotTokens(), 1);
    split(assign.getSlotChoices(), 1);
    inners[assign.getSlotTokens()] = inners[assign.getSlotChoices()] = 0;
    split(assign.getPositions(), 0);
    return success();
  }
  auto gather = cast<GatherRowsOp>(op);
  std::optional<int64_t> index = splitDim(gather.getIndex());
  // Rows of a whole table (a one-hot of each token's experts) for this
  // rank's tokens.
  if (index && !splitDim(gather.getSource()) && !gather.getInverse()) {
    split(gather.getResult(), *index);
    inners[gather.getResult()] = innerOf(gather.getIndex());
    return success();
  }
  if (splitDim(gather.getSource()) != 0 || !index ||
      (gather.getInverse() && splitDim(gather.getInverse()) != 0))
    return error(op) << "gathers rows across the split sequence (expects "
                        "this rank's rows, indices and inverse)";
  // The result's rows are the index's: its merged dimension, if any.
  split(gather.getResult(), *index);
  inners[gather.getResult()] = innerOf(gather.getIndex());
  return success();
}

/// Causal attention of this rank's queries against every key: the keys and
/// values are gathered over the group in the original order, and each
/// query sees the keys up to its position.
LogicalResult ContextParallelLayout::visitAttention(AttentionOp attention,
                                                    func::FuncOp func) {
  for (Value operand :
       {attention.getQuery(), attention.getKey(), attention.getValue()})
    if (splitDim(operand) != std::optional<int64_t>(1))
      return error(attention)
             << "expects q, k and v split along the sequence (dim 1)";
  if (attention.getPositions())
    return error(attention) << "already places its queries (positions)";
  if (attention.getStats())
    return error(attention) << "runs before meg-keep-attention-stats";
  if (config.getAttention() == CpAttention::ring) {
    // The ring's blocks are the ranks' chunk pairs: load-balanced causal
    // attention only.
    if (!attention.getCausal())
      return error(attention)
             << "ring attention splits causal attention only (its chunks "
                "are load-balanced for the causal mask); this attention "
                "is not causal: use the all-gather algorithm";
    buildAt(attention);
    auto ring = RingAttentionOp::create(
        builder, attention.getLoc(), attention.getQuery(), attention.getKey(),
        attention.getValue(), config.getMesh(), config.getAxes(),
        attention.getScaleAttr());
    for (NamedAttribute attr : attention->getDiscardableAttrs())
      ring->setAttr(attr.getName(), attr.getValue());
    attention.getResult().replaceAllUsesWith(ring.getResult());
    attention.erase();
    // Its type follows from this rank's chunks already.
    dims[ring.getResult()] = 1;
    ++numAttentions;
    return success();
  }
  Value positionsValue = attention.getCausal() ? positions(func) : Value();
  buildAt(attention);
  Value key = gathered(attention.getKey(), 1, /*partialGradient=*/true);
  Value value = gathered(attention.getValue(), 1, /*partialGradient=*/true);
  attention.getKeyMutable().assign(key);
  attention.getValueMutable().assign(value);
  if (positionsValue)
    attention.getPositionsMutable().assign(positionsValue);
  split(attention.getResult(), 1);
  ++numAttentions;
  return success();
}

void ContextParallelLayout::inheritInner(Operation *op) {
  for (Value result : op->getResults()) {
    if (!splitDim(result) || inners.count(result))
      continue;
    for (Value operand : op->getOperands())
      if (splitDim(operand) && innerOf(operand) &&
          wholeExtent(operand) == wholeExtent(result)) {
        inners[result] = innerOf(operand);
        break;
      }
  }
}

LogicalResult ContextParallelLayout::visit(Operation *op, func::FuncOp func) {
  if (failed(visitOp(op, func)))
    return failure();
  inheritInner(op);
  return success();
}

LogicalResult ContextParallelLayout::visitOp(Operation *op, func::FuncOp func) {
  bool anySplit = llvm::any_of(op->getOperands(), [&](Value operand) {
    return splitDim(operand).has_value();
  });
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    buildAt(ret);
    for (OpOperand &operand : ret->getOpOperands())
      if (std::optional<int64_t> dim = splitDim(operand.get())) {
        operand.set(gathered(operand.get(), *dim));
        ++numGathered;
      }
    return success();
  }
  if (!anySplit)
    return success();
  if (op->hasTrait<Elementwise>())
    return visitElementwise(op);
  if (auto attention = dyn_cast<AttentionOp>(op))
    return visitAttention(attention, func);
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return visitReshape(reshape, *splitDim(reshape.getInput()));
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return visitMatmul(matmul);
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return visitReduce(reduce);
  if (isa<MoeRouteOp, MoeAssignOp, GatherRowsOp>(op))
    return visitMoe(op);
  // Expert parallelism's exchange of expert slots (along dim 0) between
  // the ranks of ep: the slots of this rank's tokens go and come back.
  if (auto exchange = dyn_cast<AllToAllOp>(op)) {
    int64_t dim = *splitDim(exchange.getInput());
    if (dim == 0)
      return error(op) << "exchanges the split sequence's pieces";
    split(exchange.getResult(), dim);
    return success();
  }
  if (auto pieces = dyn_cast<SplitOp>(op)) {
    int64_t dim = *splitDim(pieces.getInput());
    if (pieces.getAxis() == dim)
      return error(op) << "cuts the split sequence into pieces";
    for (Value piece : pieces.getResults())
      split(piece, dim);
    return success();
  }
  if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
    auto in = cast<RankedTensorType>(broadcast.getInput().getType());
    int64_t dim = *splitDim(broadcast.getInput());
    int64_t moved = dim + broadcast.getType().getRank() - in.getRank();
    if (broadcast.getType().getDimSize(moved) != in.getDimSize(dim) * ranks)
      return error(op) << "broadcasts along the split sequence";
    split(broadcast.getResult(), moved);
    return success();
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    int64_t dim = *splitDim(transpose.getInput());
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    int64_t moved = llvm::find(permutation, dim) - permutation.begin();
    split(transpose.getResult(), moved);
    return success();
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    int64_t dim = *splitDim(slice.getInput());
    int64_t extent =
        cast<RankedTensorType>(slice.getInput().getType()).getDimSize(dim);
    if (slice.getOffsets()[dim] != 0 || slice.getStrides()[dim] != 1 ||
        slice.getSizes()[dim] != extent * ranks)
      return error(slice) << "slices the split sequence (dim " << dim
                          << "); only slices that keep it whole are split";
    SmallVector<int64_t> sizes(slice.getSizes());
    sizes[dim] = extent;
    slice.setSizes(sizes);
    split(slice.getResult(), dim);
    return success();
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    std::optional<int64_t> dim;
    for (Value input : concat.getInputs())
      if (std::optional<int64_t> d = splitDim(input))
        dim = d;
    if (*dim == concat.getAxis())
      return error(concat) << "concatenates along the split sequence";
    for (OpOperand &operand : concat->getOpOperands()) {
      if (splitDim(operand.get()))
        continue;
      FailureOr<Value> local = sliced(operand.get(), *dim, concat);
      if (failed(local))
        return failure();
      operand.set(*local);
    }
    split(concat.getResult(), *dim);
    return success();
  }
  // Ops on the last dimension (features, classes), any other split: the
  // tokens stay where they are.
  auto rowwise = [&](Value input, Value result) -> LogicalResult {
    int64_t dim = *splitDim(input);
    if (dim == cast<RankedTensorType>(input.getType()).getRank() - 1)
      return error(op) << "reduces over the split sequence";
    for (Value operand : op->getOperands())
      if (operand != input && splitDim(operand))
        return error(op) << "has a split operand other than its input";
    split(result, dim);
    return success();
  };
  if (auto linear = dyn_cast<LinearOp>(op))
    return rowwise(linear.getInput(), linear.getResult());
  if (auto norm = dyn_cast<RmsNormOp>(op))
    return rowwise(norm.getInput(), norm.getResult());
  if (auto norm = dyn_cast<LayerNormOp>(op))
    return rowwise(norm.getInput(), norm.getResult());
  if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
    if (softmax.getAxis() == *splitDim(softmax.getInput()))
      return error(op) << "reduces over the split sequence";
    split(softmax.getResult(), *splitDim(softmax.getInput()));
    return success();
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    if (splitDim(embedding.getTable()))
      return error(op) << "looks up rows of a split table";
    split(embedding.getResult(), *splitDim(embedding.getIds()));
    return success();
  }
  if (auto rope = dyn_cast<RopeOp>(op)) {
    int64_t dim = rope.getLayout() == RopeLayout::bshd ? 1 : 0;
    if (splitDim(rope.getInput()) != std::optional<int64_t>(dim))
      return error(op) << "expects its input split along the sequence";
    for (OpOperand *table : {&rope.getCosMutable(), &rope.getSinMutable()}) {
      if (splitDim(table->get()))
        return error(op) << "expects whole cos and sin tables";
      Value whole = table->get();
      auto type = cast<RankedTensorType>(whole.getType());
      if (type.getDimSize(0) != sequence) {
        // The table's first rows are the sequence's.
        buildAfterValue(whole);
        SmallVector<int64_t> sizes(type.getShape());
        sizes[0] = sequence;
        whole = SliceOp::create(
            builder, whole.getLoc(), whole,
            builder.getDenseI64ArrayAttr(SmallVector<int64_t>(2, 0)),
            builder.getDenseI64ArrayAttr(sizes),
            builder.getDenseI64ArrayAttr(SmallVector<int64_t>(2, 1)));
      }
      FailureOr<Value> local = sliced(whole, 0, rope);
      if (failed(local))
        return failure();
      table->set(*local);
    }
    split(rope.getResult(), dim);
    return success();
  }
  // The token losses of this rank's chunks: meg-fsdp averages the loss
  // over the data-parallel group, which holds the context axes.
  if (isa<CrossEntropyOp>(op))
    return success();
  return error(op) << "'" << op->getName()
                   << "' has no context-parallel form (its operand holds "
                      "this rank's chunks of the sequence)";
}

LogicalResult ContextParallelLayout::layOut(func::FuncOp func) {
  dims.clear();
  inners.clear();
  slices.clear();
  gathers.clear();
  localPositions = {};
  if (func.isExternal())
    return success();
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (op != func)
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    if (op->getNumRegions())
      return op->emitError()
             << "meg-context-parallel runs before regions are formed";
    if (isa<func::CallOp>(op))
      return op->emitError()
             << "meg-context-parallel runs on inlined functions";
    if (isa<ParamStoreOp>(op))
      return op->emitError()
             << "meg-context-parallel runs before meg-optimizer";
  }
  if (failed(seed(func)))
    return failure();
  numSequences += llvm::count_if(dims, [](auto &) { return true; });
  for (Operation *op : ops)
    if (failed(visit(op, func)))
      return failure();
  return success();
}

struct MegContextParallelPass
    : public mlir::meg::impl::MegContextParallelBase<MegContextParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config = module->getAttrOfType<ContextParallelAttr>(
        MegDialect::kContextParallelAttrName);
    if (!config)
      return;
    auto mesh = module.lookupSymbol<MeshOp>(config.getMesh().getAttr());
    if (!mesh) {
      module.emitError() << "meg-context-parallel: mesh " << config.getMesh()
                         << " is not a meg.mesh";
      return signalPassFailure();
    }
    int64_t ranks = groupRanks(mesh, config.getAxes());
    // The parameters' gradients of the ranks' chunks are summed by meg-fsdp
    // over its group, which must hold the context axes.
    if (module->hasAttr(MegDialect::kOptimizerAttrName)) {
      auto fsdp = module->getAttrOfType<FsdpAttr>(MegDialect::kFsdpAttrName);
      bool folded = fsdp && fsdp.getContextAxes() &&
                    llvm::all_of(config.getAxes(), [&](Attribute axis) {
                      return llvm::is_contained(fsdp.getContextAxes(), axis);
                    });
      if (!folded) {
        module.emitError()
            << "meg-context-parallel: a training model sums its gradients "
               "over the context-parallel ranks in meg-fsdp's group: "
               "meg.fsdp must name "
            << config.getAxes() << " among its shard and context_axes";
        return signalPassFailure();
      }
    }
    registerSubmesh(module, mesh, config.getMesh(), config.getAxes());
    ContextParallelLayout layout(config, ranks);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(layout.layOut(func)))
        return signalPassFailure();
    if (layout.numSequences == 0) {
      module.emitError()
          << "meg-context-parallel: the model reads no token sequence to "
             "split (the ids of a meg.embedding, the labels of a "
             "meg.cross_entropy or meg.label_count)";
      return signalPassFailure();
    }
    if (layout.numAttentions == 0) {
      module.emitError() << "meg-context-parallel: the model has no "
                            "attention whose sequence could be split";
      return signalPassFailure();
    }
    numGathered += layout.numGathered;
    module->removeAttr(MegDialect::kContextParallelAttrName);
  }
};

} // namespace  Value local = localChunks(whole, dim);

