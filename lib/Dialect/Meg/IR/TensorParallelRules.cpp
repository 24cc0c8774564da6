//===- TensorParallelRules.cpp - the ops' tensor-parallel sharding rules -===//
//
// Each op's TensorParallelOpInterface: how it runs when its operands are
// split over the tensor-parallel group (Megatron's layout), through the
// services of meg-tensor-parallel (TensorParallelRewriter). Linear layers
// and embeddings that record a #meg.tp_layer split their work; the rest
// follow the split dimension where they can and gather it where they
// cannot.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::meg;

/// Ops with the Elementwise trait (NumPy broadcasting).
LogicalResult mlir::meg::layOutElementwise(Operation *op,
                                           TensorParallelRewriter &rw) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = type.getRank();
  auto alignedDim = [&](Value operand, int64_t dim) {
    return dim + rank - cast<RankedTensorType>(operand.getType()).getRank();
  };
  // The result takes the first split operand's layout (dimensions aligned
  // at the end, as NumPy broadcasting aligns them); an operand split
  // another way is gathered.
  TpLayout result;
  for (OpOperand &operand : op->getOpOperands()) {
    TpLayout layout = rw.layoutOf(operand.get());
    if (layout.isWhole())
      continue;
    TpLayout aligned = layout.moved(alignedDim(operand.get(), layout.dim));
    if (result.isWhole()) {
      result = aligned;
      continue;
    }
    if (aligned == result)
      continue;
    FailureOr<Value> whole = rw.gathered(operand.get(), op);
    if (failed(whole))
      return failure();
    operand.set(*whole);
  }
  // Whole operands: broadcast along the split dimension, they enter the
  // group; otherwise this rank takes its block of them.
  rw.buildAt(op);
  for (OpOperand &operand : op->getOpOperands()) {
    if (rw.isSplit(operand.get()))
      continue;
    auto operandType = cast<RankedTensorType>(operand.get().getType());
    int64_t dim = result.dim - (rank - operandType.getRank());
    if (dim < 0 || operandType.getDimSize(dim) == 1) {
      operand.set(rw.enter(operand.get()));
      continue;
    }
    if (result.kind == TpLayout::GroupBlock)
      return rw.error(op) << "operand #" << operand.getOperandNumber()
                          << " is whole along dim " << dim
                          << ", where another is the block of one of "
                          << result.parts << " groups that ranks share";
    operand.set(rw.sliced(operand.get(), dim));
  }
  rw.splitResult(op->getResult(0), result);
  return success();
}

/// A column-parallel layer: each rank computes its block of the output
/// features (or, with fewer groups than ranks, its group's block).
static LogicalResult layOutColumn(LinearOp linear, TensorParallelRewriter &rw) {
  // The input whole on every rank (a sequence block gathered), entering the
  // group: each rank's block of outputs gives part of its gradient.
  FailureOr<Value> input = rw.gathered(linear.getInput(), linear);
  if (failed(input))
    return failure();
  rw.buildAt(linear);
  linear.getInputMutable().assign(rw.enter(*input));
  // planning gave the layer's weight its split.
  TpLayout split = *rw.paramSplitOf(linear.getWeight());
  if (split.kind == TpLayout::GroupBlock) {
    linear.getWeightMutable().assign(
        rw.groupBlock(linear.getWeight(), split.parts));
    if (linear.getBias())
      linear.getBiasMutable().assign(
          rw.groupBlock(linear.getBias(), split.parts));
  }
  int64_t rank = cast<RankedTensorType>(linear.getType()).getRank();
  rw.splitResult(linear.getResult(),
                 TpLayout::make(split.kind, rank - 1, split.parts));
  return success();
}

/// A row-parallel layer: each rank multiplies its block of the input
/// features, and the group sums the partial products (or reduce-scatters
/// them over the sequence).
static LogicalResult layOutRow(LinearOp linear, TensorParallelRewriter &rw) {
  auto type = cast<RankedTensorType>(linear.getType());
  int64_t features = type.getRank() - 1;
  TpLayout expected = TpLayout::make(TpLayout::Split, features, rw.ranks());
  // An input not split along its features is made so: gathered, then this
  // rank's block taken (Megatron's scatter to the tensor-parallel region).
  if (rw.layoutOf(linear.getInput()) != expected) {
    FailureOr<Value> whole = rw.gathered(linear.getInput(), linear);
    if (failed(whole))
      return failure();
    linear.getInputMutable().assign(rw.sliced(*whole, features));
  }
  OpBuilder &builder = rw.buildAt(linear);
  bool sequenceParallel = rw.sequenceParallel();
  if (sequenceParallel &&
      (type.getRank() < 3 || type.getDimSize(1) % rw.ranks()))
    return rw.error(linear)
           << "sequence parallelism splits dim 1 of " << type << " into "
           << rw.ranks() << " blocks, which do not divide it";
  Value partial = LinearOp::create(builder, linear.getLoc(), linear.getInput(),
                                   linear.getWeight(), Value());
  Value result = sequenceParallel
                     ? rw.reduceScatterAlong(partial, 1)
                     : rw.allReduce(partial, CollectiveReduce::sum);
  // The bias after the sum; with sequence parallelism it is added to this
  // rank's block of the sequence, so its gradient is summed over the group.
  if (Value bias = linear.getBias())
    result = AddOp::create(builder, linear.getLoc(), result,
                           sequenceParallel ? rw.enter(bias) : bias);
  rw.markTrainable(result);
  if (sequenceParallel)
    rw.setLayout(result, TpLayout::make(TpLayout::Split, 1, rw.ranks()));
  linear.getResult().replaceAllUsesWith(result);
  linear.erase();
  return success();
}

/// A normalization over the last dimension, on this rank's rows.
static LogicalResult layOutNormalization(Operation *op, Value input,
                                         TensorParallelRewriter &rw) {
  TpLayout layout = rw.layoutOf(input);
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  if (layout.isWhole() || layout.dim == rank - 1 ||
      llvm::any_of(op->getOperands(), [&](Value operand) {
        return operand != input && rw.isSplit(operand);
      }))
    return rw.makeWhole(op);
  // Over the unsplit last dimension, on this rank's rows; the weights,
  // applied to part of the rows, enter the group.
  rw.buildAt(op);
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() != input)
      operand.set(rw.enter(operand.get()));
  rw.splitResult(op->getResult(0), layout);
  return success();
}

LogicalResult
LinearOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  LinearOp linear = *this;
  if (auto layer =
          linear->getAttrOfType<TpLayerAttr>(MegDialect::kTpLayerAttrName))
    return layer.getKind() == TpLayerKind::row ? layOutRow(linear, rw)
                                               : layOutColumn(linear, rw);
  // A layer the builder did not split runs on whole weights: over the rows
  // of an input split along them, on whole values otherwise.
  TpLayout layout = rw.layoutOf(linear.getInput());
  int64_t rank = cast<RankedTensorType>(linear.getType()).getRank();
  if (rw.isSplit(linear.getWeight()) ||
      (linear.getBias() && rw.isSplit(linear.getBias())) ||
      layout.dim == rank - 1)
    return rw.makeWhole(linear);
  rw.buildAt(linear);
  linear.getWeightMutable().assign(rw.enter(linear.getWeight()));
  if (linear.getBias())
    linear.getBiasMutable().assign(rw.enter(linear.getBias()));
  rw.splitResult(linear.getResult(), layout);
  return success();
}

LogicalResult
EmbeddingOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  EmbeddingOp embedding = *this;
  if (!embedding->hasAttr(MegDialect::kTpLayerAttrName)) {
    if (rw.isSplit(embedding.getTable()))
      return rw.makeWhole(embedding);
    rw.splitResult(embedding.getResult(), rw.layoutOf(embedding.getIds()));
    return success();
  }
  FailureOr<Value> ids = rw.gathered(embedding.getIds(), embedding);
  if (failed(ids))
    return failure();
  embedding.getIdsMutable().assign(*ids);
  // Each rank looks the ids up in its block of rows (zero rows for the
  // others) and the ranks' rows are summed.
  auto type = cast<RankedTensorType>(embedding.getType());
  bool sequenceParallel = rw.sequenceParallel();
  if (sequenceParallel &&
      (type.getRank() < 3 || type.getDimSize(1) % rw.ranks()))
    return rw.error(embedding)
           << "sequence parallelism splits dim 1 of " << type << " into "
           << rw.ranks() << " blocks, which do not divide it";
  OpBuilder &builder = rw.buildAt(embedding);
  int64_t rows =
      cast<RankedTensorType>(embedding.getTable().getType()).getDimSize(0);
  Value partial =
      EmbeddingOp::create(builder, embedding.getLoc(), embedding.getTable(),
                          embedding.getIds(), rw.firstOfBlock(rows));
  Value result = sequenceParallel
                     ? rw.reduceScatterAlong(partial, 1)
                     : rw.allReduce(partial, CollectiveReduce::sum);
  if (sequenceParallel)
    rw.setLayout(result, TpLayout::make(TpLayout::Split, 1, rw.ranks()));
  rw.markTrainableLike(result, embedding.getTable());
  embedding.getResult().replaceAllUsesWith(result);
  embedding.erase();
  return success();
}

LogicalResult
RopeOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  RopeOp rope = *this;
  TpLayout layout = rw.layoutOf(rope.getInput());
  int64_t sequence = rope.getLayout() == RopeLayout::bshd ? 1 : 0;
  if (layout.isWhole() || layout.dim == sequence || layout.dim == 3 ||
      rw.isSplit(rope.getCos()) || rw.isSplit(rope.getSin()))
    return rw.makeWhole(rope);
  rw.buildAt(rope);
  rope.getCosMutable().assign(rw.enter(rope.getCos()));
  rope.getSinMutable().assign(rw.enter(rope.getSin()));
  rw.splitResult(rope.getResult(), layout);
  return success();
}

/// Attention (`op`: q, k, v its operands 0 to 2) splits alike along heads
/// (dim 2) or the batch (dim 0) in q, k and v; keys and values may be a
/// group's block when the query heads are split.
static LogicalResult layOutAttention(TensorParallelRewriter &rw, Operation *op,
                                     Value result, Value stats) {
  TpLayout query = rw.layoutOf(op->getOperand(0));
  bool aligned = !query.isWhole() && (query.dim == 0 || query.dim == 2);
  for (unsigned index : {1u, 2u}) {
    TpLayout layout = rw.layoutOf(op->getOperand(index));
    bool groupOfHeads = query.kind == TpLayout::Split && query.dim == 2 &&
                        layout.kind == TpLayout::GroupBlock && layout.dim == 2;
    aligned &= layout == query || groupOfHeads;
  }
  if (!aligned)
    return rw.makeWhole(op);
  rw.splitResult(result, query);
  if (stats)
    rw.splitResult(stats, query.moved(query.dim == 2 ? 1 : 0));
  return success();
}

LogicalResult
AttentionOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  return layOutAttention(rw, *this, getResult(), getStats());
}

// The ring passes each rank's heads around its context-parallel group as
// attention splits them.
LogicalResult
RingAttentionOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  return layOutAttention(rw, *this, getResult(), Value());
}

LogicalResult
ReshapeOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  ReshapeOp reshape = *this;
  TpLayout layout = rw.layoutOf(reshape.getInput());
  SmallVector<int64_t> in = rw.wholeShape(reshape.getInput());
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
      rw.splitResult(reshape.getResult(), layout.moved(d));
      return success();
    }
    prefix *= out[d];
  }
  return rw.makeWhole(reshape);
}

LogicalResult
TransposeOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  TransposeOp op = *this;
  TpLayout layout = rw.layoutOf(op.getInput());
  ArrayRef<int64_t> permutation = op.getPermutation();
  int64_t dim = llvm::find(permutation, layout.dim) - permutation.begin();
  rw.splitResult(op.getResult(), layout.moved(dim));
  return success();
}

LogicalResult
SliceOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  SliceOp slice = *this;
  TpLayout layout = rw.layoutOf(slice.getInput());
  int64_t d = layout.dim;
  if (slice.getOffsets()[d] != 0 ||
      slice.getSizes()[d] != rw.wholeShape(slice.getInput())[d] ||
      slice.getStrides()[d] != 1)
    return rw.makeWhole(slice);
  SmallVector<int64_t> sizes(slice.getSizes());
  sizes[d] /= layout.parts;
  slice.setSizesAttr(Builder(getContext()).getDenseI64ArrayAttr(sizes));
  rw.splitResult(slice.getResult(), layout);
  return success();
}

LogicalResult
ConcatOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  ConcatOp concat = *this;
  TpLayout layout = rw.layoutOf(concat.getInputs().front());
  if (layout.isWhole() ||
      layout.dim == static_cast<int64_t>(concat.getAxis()) ||
      llvm::any_of(concat.getInputs(),
                   [&](Value input) { return rw.layoutOf(input) != layout; }))
    return rw.makeWhole(concat);
  rw.splitResult(concat.getResult(), layout);
  return success();
}

LogicalResult
SplitOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  SplitOp split = *this;
  TpLayout layout = rw.layoutOf(split.getInput());
  if (layout.dim == static_cast<int64_t>(split.getAxis()))
    return rw.makeWhole(split);
  for (Value result : split.getResults())
    rw.splitResult(result, layout);
  return success();
}

LogicalResult
BroadcastOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  BroadcastOp broadcast = *this;
  TpLayout layout = rw.layoutOf(broadcast.getInput());
  auto type = cast<RankedTensorType>(broadcast.getType());
  int64_t dim =
      layout.dim + type.getRank() -
      cast<RankedTensorType>(broadcast.getInput().getType()).getRank();
  if (type.getDimSize(dim) != rw.wholeShape(broadcast.getInput())[layout.dim])
    return rw.makeWhole(broadcast);
  rw.splitResult(broadcast.getResult(), layout.moved(dim));
  return success();
}

LogicalResult
ReduceOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  ReduceOp reduce = *this;
  TpLayout layout = rw.layoutOf(reduce.getInput());
  ArrayRef<int64_t> dims = reduce.getDims();
  if (!llvm::is_contained(dims, layout.dim)) {
    int64_t dim = layout.dim;
    if (!reduce.getKeepDims())
      dim -= llvm::count_if(dims, [&](int64_t d) { return d < layout.dim; });
    rw.splitResult(reduce.getResult(), layout.moved(dim));
    return success();
  }
  if (layout.kind != TpLayout::Split)
    return rw.makeWhole(reduce);
  // Each rank reduces its block and the group completes the reduction (a
  // mean, of equal blocks, is the sum of the blocks' means over the ranks).
  OpBuilder &builder = rw.buildAfter(reduce);
  Value result =
      rw.allReduce(reduce.getResult(), reduce.getKind() == ReduceKind::max
                                           ? CollectiveReduce::max
                                           : CollectiveReduce::sum);
  Operation *completed = result.getDefiningOp();
  if (reduce.getKind() == ReduceKind::mean) {
    auto type = cast<RankedTensorType>(result.getType());
    auto scalar = RankedTensorType::get({}, type.getElementType());
    result = DivOp::create(
        builder, reduce.getLoc(), result,
        arith::ConstantOp::create(
            builder, reduce.getLoc(), scalar,
            DenseElementsAttr::get(
                scalar,
                builder.getFloatAttr(type.getElementType(),
                                     static_cast<double>(rw.ranks())))));
  }
  reduce.getResult().replaceAllUsesExcept(result, completed);
  rw.markTrainableLike(result, reduce.getResult());
  return success();
}

LogicalResult
CrossEntropyOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  CrossEntropyOp loss = *this;
  Value logits = loss.getLogits();
  TpLayout layout = rw.layoutOf(logits);
  auto type = cast<RankedTensorType>(logits.getType());
  int64_t rank = type.getRank();
  if (layout.kind != TpLayout::Split || layout.dim != rank - 1 ||
      rw.isSplit(loss.getLabels()))
    return rw.makeWhole(loss);
  // Megatron's vocab-parallel cross-entropy, in f32, on the logits of this
  // rank's classes; the maximum only keeps exp() in range (the loss does
  // not depend on it).
  OpBuilder &builder = rw.buildAt(loss);
  Location loc = loss.getLoc();
  Type f32 = builder.getF32Type();
  Value wide = type.getElementType() == f32
                   ? logits
                   : CastOp::create(builder, loc, type.clone(f32), logits);
  Value localMax = ReduceOp::create(builder, loc, ReduceKind::max, wide,
                                    SmallVector<int64_t>{rank - 1},
                                    /*keep_dims=*/false);
  Value max = StopGradientOp::create(
      builder, loc, rw.allReduce(localMax, CollectiveReduce::max));
  int64_t classes = type.getShape().back();
  auto stats = VocabShardStatsOp::create(
      builder, loc, logits, max, loss.getLabels(), rw.firstOfBlock(classes),
      builder.getI64IntegerAttr(classes * rw.ranks()),
      loss.getIgnoreIndexAttr());
  Value sumExp = rw.allReduce(stats.getSumExp(), CollectiveReduce::sum);
  Value target = rw.allReduce(stats.getTarget(), CollectiveReduce::sum);
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
  rw.markTrainableLike(total, logits);
  loss.getResult().replaceAllUsesWith(total);
  loss.erase();
  return success();
}

LogicalResult
RmsNormOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  return layOutNormalization(*this, getInput(), rw);
}

LogicalResult
LayerNormOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  return layOutNormalization(*this, getInput(), rw);
}

LogicalResult
SoftmaxOp::layOutOverTensorParallelGroup(TensorParallelRewriter &rw) {
  return layOutNormalization(*this, getInput(), rw);
}
