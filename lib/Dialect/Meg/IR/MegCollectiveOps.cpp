//===- MegCollectiveOps.cpp - collectives over submeshes ---------------===//
//
// Checks that every collective communicates over a registered group and
// that its shapes agree with the group size.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"
#include "SharedVerifiers.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::meg;

namespace {
/// None: the same type; Exchange: the same type, with dim split into one
/// piece per rank.
enum class ShardChange { Gather, Scatter, None, Exchange };
} // namespace

/// Verifies the group of `op` and that `produced` follows from `input`.
static LogicalResult verifyCollective(Operation *op,
                                      SymbolTableCollection &symbolTable,
                                      FlatSymbolRefAttr mesh, ArrayAttr axes,
                                      Type inputType, RankedTensorType produced,
                                      ShardChange change, int64_t dim) {
  FailureOr<int64_t> groupSize =
      SubmeshOp::verifyGroup(op, symbolTable, mesh, axes);
  if (failed(groupSize))
    return failure();
  auto input = cast<RankedTensorType>(inputType);
  if (input.getElementType() != produced.getElementType())
    return op->emitOpError() << "produces element type "
                             << produced.getElementType() << " from "
                             << input.getElementType();
  if (change == ShardChange::None || change == ShardChange::Exchange) {
    if (input != produced)
      return op->emitOpError() << "produces " << produced << " from " << input;
    if (change == ShardChange::Exchange &&
        (input.getRank() == 0 || input.getDimSize(dim) % *groupSize != 0))
      return op->emitOpError()
             << "exchanges pieces of dim " << dim << " with a group of "
             << *groupSize << ", which does not divide its "
             << (input.getRank() ? input.getDimSize(dim) : 0) << " rows";
    return success();
  }
  if (dim < 0 || dim >= input.getRank())
    return op->emitOpError() << "dim " << dim << " is out of range for rank "
                             << input.getRank();
  SmallVector<int64_t> expected(input.getShape());
  if (change == ShardChange::Gather) {
    expected[dim] *= *groupSize;
  } else {
    if (expected[dim] % *groupSize != 0)
      return op->emitOpError() << "scatters dim " << dim << " of size "
                               << expected[dim] << " over a group of "
                               << *groupSize
                               << ", which does not divide it (pad first)";
    expected[dim] /= *groupSize;
  }
  if (produced.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError() << "over a group of " << *groupSize
                             << " expects result shape "
                             << formatShape(expected) << ", got "
                             << formatShape(produced.getShape());
  return success();
}

/// The future a started collective returns: of the tensor `op` produces.
static FutureType futureOf(Operation *op) {
  return FutureType::get(op->getContext(),
                         cast<RankedTensorType>(op->getResult(0).getType()));
}

bool AllGatherOp::hasStartedForm() { return true; }
Value AllGatherOp::buildStart(OpBuilder &builder) {
  return AllGatherStartOp::create(builder, getLoc(), futureOf(*this),
                                  getInput(), getMeshAttr(), getAxesAttr(),
                                  getDimAttr());
}

bool ReduceScatterOp::hasStartedForm() { return true; }
Value ReduceScatterOp::buildStart(OpBuilder &builder) {
  return ReduceScatterStartOp::create(builder, getLoc(), futureOf(*this),
                                      getInput(), getMeshAttr(), getAxesAttr(),
                                      getDimAttr(), getReduceAttr());
}

bool AllReduceOp::hasStartedForm() { return true; }
Value AllReduceOp::buildStart(OpBuilder &builder) {
  return AllReduceStartOp::create(builder, getLoc(), futureOf(*this),
                                  getInput(), getMeshAttr(), getAxesAttr(),
                                  getReduceAttr());
}

bool AllToAllOp::hasStartedForm() { return true; }
Value AllToAllOp::buildStart(OpBuilder &builder) {
  return AllToAllStartOp::create(builder, getLoc(), futureOf(*this), getInput(),
                                 getMeshAttr(), getAxesAttr());
}

bool ShiftOp::hasStartedForm() { return true; }
Value ShiftOp::buildStart(OpBuilder &builder) {
  return ShiftStartOp::create(builder, getLoc(), futureOf(*this), getInput(),
                              getMeshAttr(), getAxesAttr(), getOffsetAttr());
}

static RankedTensorType futureValue(Value future) {
  return cast<FutureType>(future.getType()).getValueType();
}

RankedTensorType AllGatherOp::getProducedType() {
  return cast<RankedTensorType>(getType());
}
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Gather, getDim());
}

RankedTensorType ReduceScatterOp::getProducedType() {
  return cast<RankedTensorType>(getType());
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Scatter, getDim());
}

RankedTensorType ShardSliceOp::getProducedType() {
  return cast<RankedTensorType>(getType());
}
LogicalResult ShardSliceOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Scatter, getDim());
}

RankedTensorType AllReduceOp::getProducedType() {
  return cast<RankedTensorType>(getType());
}
LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::None, 0);
}

RankedTensorType AllToAllOp::getProducedType() {
  return cast<RankedTensorType>(getType());
}
LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Exchange, 0);
}

// Exchanging the gradient's pieces sends each back where its value came
// from.
FailureOr<SmallVector<Value>> AllToAllOp::buildVJP(OpBuilder &b,
                                                   ValueRange grads) {
  return SmallVector<Value>{AllToAllOp::create(b, getLoc(), grads[0],
                                               getMeshAttr(), getAxesAttr())
                                .getResult()};
}

RankedTensorType ShiftOp::getProducedType() {
  return cast<RankedTensorType>(getType());
}
LogicalResult ShiftOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::None, 0);
}

// Shifting the gradient back sends each to the rank its value came from.
FailureOr<SmallVector<Value>> ShiftOp::buildVJP(OpBuilder &b,
                                                ValueRange grads) {
  return SmallVector<Value>{
      ShiftOp::create(b, getLoc(), grads[0], getMeshAttr(), getAxesAttr(),
                      b.getI64IntegerAttr(-static_cast<int64_t>(getOffset())))
          .getResult()};
}

//===----------------------------------------------------------------------===//
// RingAttentionOp, RingAttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult
RingAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttentionScale(loc, "meg.ring_attention",
                                  adaptor.getScale().convertToDouble())))
    return failure();
  return inferAttentionType(
      loc, "meg.ring_attention", adaptor.getQuery().getType(),
      adaptor.getKey().getType(), adaptor.getValue().getType(), inferred);
}

/// A ring's group is registered, and each rank holds its two chunks of
/// queries, keys and values alike.
static LogicalResult verifyRing(Operation *op, SymbolTableCollection &table,
                                FlatSymbolRefAttr mesh, ArrayAttr axes,
                                Value query, Value key) {
  if (failed(SubmeshOp::verifyGroup(op, table, mesh, axes)))
    return failure();
  int64_t queries = cast<RankedTensorType>(query.getType()).getDimSize(1);
  int64_t keys = cast<RankedTensorType>(key.getType()).getDimSize(1);
  if (queries != keys)
    return op->emitOpError() << "expects as many keys as queries on a rank "
                                "(its two chunks of the sequence), got "
                             << keys << " keys for " << queries << " queries";
  if (queries % 2 != 0)
    return op->emitOpError()
           << "expects a rank's two equal chunks of the sequence, got "
           << queries << " tokens";
  return success();
}

LogicalResult RingAttentionOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyRing(*this, table, getMeshAttr(), getAxesAttr(), getQuery(),
                    getKey());
}

LogicalResult
RingAttentionGradOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyRing(*this, table, getMeshAttr(), getAxesAttr(), getQuery(),
                    getKey());
}

FailureOr<SmallVector<Value>> RingAttentionOp::buildVJP(OpBuilder &b,
                                                        ValueRange grads) {
  auto grad = RingAttentionGradOp::create(
      b, getLoc(), grads[0], getQuery(), getKey(), getValue(), getResult(),
      getMeshAttr(), getAxesAttr(), getScaleAttr());
  return SmallVector<Value>(grad.getResults());
}

/// A model's collectives have gradients for the sum of partial results
/// only.
static LogicalResult requireSumForGradient(Operation *op,
                                           CollectiveReduce reduce) {
  if (reduce == CollectiveReduce::sum)
    return success();
  return op->emitOpError()
         << "has no gradient with reduction "
         << stringifyCollectiveReduce(reduce)
         << " (only the sum of a model's partial results does)";
}

// A sum's gradient passes through (Megatron's reduce-from-tensor-parallel
// region): every rank continues with the same value.
FailureOr<SmallVector<Value>> AllReduceOp::buildVJP(OpBuilder &,
                                                    ValueRange grads) {
  if (failed(requireSumForGradient(*this, getReduce())))
    return failure();
  return SmallVector<Value>{grads[0]};
}

// The ranks go on with the gathered value: each holds its whole gradient,
// of which its shard's is its piece.
FailureOr<SmallVector<Value>> AllGatherOp::buildVJP(OpBuilder &b,
                                                    ValueRange grads) {
  Value grad = ShardSliceOp::create(b, getLoc(), getInput().getType(),
                                    grads[0], getMeshAttr(), getAxesAttr(),
                                    getDimAttr());
  return SmallVector<Value>{grad};
}

// Every rank's input contributes to every piece of the sum.
FailureOr<SmallVector<Value>> ReduceScatterOp::buildVJP(OpBuilder &b,
                                                        ValueRange grads) {
  if (failed(requireSumForGradient(*this, getReduce())))
    return failure();
  Value grad = AllGatherOp::create(b, getLoc(), getInput().getType(), grads[0],
                                   getMeshAttr(), getAxesAttr(), getDimAttr());
  return SmallVector<Value>{grad};
}

// The input is the same on every rank; each rank has its piece's gradient.
FailureOr<SmallVector<Value>> ShardSliceOp::buildVJP(OpBuilder &b,
                                                     ValueRange grads) {
  Value grad = AllGatherOp::create(b, getLoc(), getInput().getType(), grads[0],
                                   getMeshAttr(), getAxesAttr(), getDimAttr());
  return SmallVector<Value>{grad};
}

namespace {
/// `shard_slice(all_reduce sum x)` over one group is `reduce_scatter sum x`,
/// which sends half the bytes; a transpose in between (which commutes with
/// the elementwise sum) moves before the reduction.
struct SliceOfSumIsReduceScatter : public OpRewritePattern<ShardSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ShardSliceOp slice,
                                PatternRewriter &rewriter) const override {
    Value input = slice.getInput();
    auto transpose = input.getDefiningOp<TransposeOp>();
    if (transpose) {
      if (!transpose->hasOneUse())
        return failure();
      input = transpose.getInput();
    }
    auto sum = input.getDefiningOp<AllReduceOp>();
    if (!sum || !sum->hasOneUse() ||
        sum.getReduce() != CollectiveReduce::sum ||
        sum.getMeshAttr() != slice.getMeshAttr() ||
        sum.getAxesAttr() != slice.getAxesAttr())
      return failure();
    Value local = sum.getInput();
    // The replacements keep the records (layer, pipeline pass) of the ops
    // they replace.
    if (transpose) {
      auto moved = TransposeOp::create(rewriter, transpose.getLoc(), local,
                                       transpose.getPermutationAttr());
      moved->setDiscardableAttrs(transpose->getDiscardableAttrDictionary());
      local = moved;
    }
    DictionaryAttr records = sum->getDiscardableAttrDictionary();
    auto scatter = rewriter.replaceOpWithNewOp<ReduceScatterOp>(
        slice, slice.getType(), local, slice.getMeshAttr(), slice.getAxesAttr(),
        slice.getDimAttr(), sum.getReduceAttr());
    scatter->setDiscardableAttrs(records);
    // A collective is never dead code to the folder (every rank must issue
    // the same ones), so the one replaced goes explicitly.
    if (transpose)
      rewriter.eraseOp(transpose);
    rewriter.eraseOp(sum);
    return success();
  }
};
} // namespace

void ShardSliceOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<SliceOfSumIsReduceScatter>(context);
}

LogicalResult CopyToGroupOp::verifySymbolUses(SymbolTableCollection &table) {
  return failure(failed(
      SubmeshOp::verifyGroup(*this, table, getMeshAttr(), getAxesAttr())));
}

// Each rank's consumers see part of the gradient; their sum is the whole.
FailureOr<SmallVector<Value>> CopyToGroupOp::buildVJP(OpBuilder &b,
                                                      ValueRange grads) {
  Value grad = AllReduceOp::create(
      b, getLoc(), grads[0].getType(), grads[0], getMeshAttr(), getAxesAttr(),
      CollectiveReduceAttr::get(getContext(), CollectiveReduce::sum));
  return SmallVector<Value>{grad};
}

RankedTensorType AllGatherStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult AllGatherStartOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Gather, getDim());
}

RankedTensorType ReduceScatterStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Scatter, getDim());
}

RankedTensorType AllReduceStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult AllReduceStartOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::None, 0);
}

RankedTensorType ShiftStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult ShiftStartOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::None, 0);
}

RankedTensorType AllToAllStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult AllToAllStartOp::verifySymbolUses(SymbolTableCollection &table) {
  if (getInput().getType() != getProducedType())
    return emitOpError() << "exchanges " << getInput().getType()
                         << " pieces, so its future must hold that type, got "
                         << getProducedType();
  return verifyCollective(*this, table, getMeshAttr(), getAxesAttr(),
                          getInput().getType(), getProducedType(),
                          ShardChange::Exchange, 0);
}

/// A point-to-point transfer's peer is a rank of its registered group.
static LogicalResult verifyPeer(Operation *op, SymbolTableCollection &table,
                                FlatSymbolRefAttr mesh, ArrayAttr axes,
                                int64_t peer) {
  FailureOr<int64_t> size = SubmeshOp::verifyGroup(op, table, mesh, axes);
  if (failed(size))
    return failure();
  if (peer < 0 || peer >= *size)
    return op->emitOpError() << "peer " << peer << " is not a rank of its "
                             << *size << "-rank group";
  return success();
}

RankedTensorType SendStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult SendStartOp::verifySymbolUses(SymbolTableCollection &table) {
  if (getInput().getType() != getProducedType())
    return emitOpError() << "sends " << getInput().getType()
                         << ", so its future must hold that type, got "
                         << getProducedType();
  return verifyPeer(*this, table, getMeshAttr(), getAxesAttr(), getPeer());
}

RankedTensorType RecvStartOp::getProducedType() {
  return futureValue(getFuture());
}
LogicalResult RecvStartOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyPeer(*this, table, getMeshAttr(), getAxesAttr(), getPeer());
}

LogicalResult WaitOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto future = dyn_cast<FutureType>(adaptor.getFuture().getType());
  if (!future)
    return inferError(loc, "meg.wait",
                      "expects a !meg.future operand, got " +
                          debugString(adaptor.getFuture().getType()));
  inferred.push_back(future.getValueType());
  return success();
}
