//===- MapKernelsToGpu.cpp - dispatches as GPU launches ----------------===//
//
// meg-map-kernels-to-gpu. After meg-distribute-workgroups a kernel function
// is its temporaries and one scf.forall per dispatch, whose induction
// variable is the workgroup id. Each dispatch becomes a gpu.launch with one
// block per workgroup, and each loop nest of the workgroup's tile is spread
// over the block's threads by its form:
//
// - no reduction (pointwise, a fill, a copy): thread t takes iterations
//   t, t + T, t + 2T, ... of the tile (T threads), so that neighbouring
//   threads touch neighbouring elements. Where every operand that the
//   innermost loop moves through is contiguous along it and the row splits
//   into whole 16-byte vectors of the widest element, each iteration is
//   a vector of such elements: 128-bit loads and stores, taken when the
//   operands' addresses are aligned for them (checked once, uniformly, at
//   run time) and the element loop otherwise;
// - a reduction over the innermost, contiguous dimensions with one
//   associative combiner (a row reduction: norms, softmax, cross-entropy):
//   a warp per row when the tile has at least as many rows as the block has
//   warps, a block per row otherwise; the lanes stride over the row, each
//   keeping its partial in a register, and the partials meet in a subgroup
//   reduction (butterfly shuffles) or a block reduction (shuffles, shared
//   memory and a barrier);
// - a row's maximum and sum of exponentials reduced together (a
//   meg.online_softmax nest): as a row reduction, with (maximum, sum)
//   pairs, the lanes' pairs combined by xor shuffles and, for a block, the
//   warps' pairs through shared memory, every step the nest's own
//   rescaling combine;
// - a reduction across rows (a column reduction's partials, the combine
//   over the workgroups' partials): a thread per output element, its
//   reduction serial in loop order, when the tile has an output for every
//   thread; otherwise a warp or block per output as for rows, the lanes
//   striding over the reduction in a fixed order.
//
// A tile that several nests of a dispatch read and none writes is first
// copied into shared memory, and the nests read it there: the dispatch
// reads it from global memory once.
//
// Steps that are not loop nests run on the block's first thread. A barrier
// separates every step from the next one that touches memory, so each
// reads what the whole block wrote before it.
//
// One pass, over 600 lines: the mappings above share its analysis of a
// tile's loop nests and the reductions' combine code; a file per form would
// repeat both.
//
//===----------------------------------------------------------------------===//

#include "megc/Kernels/Passes.h"

#include "DispatchPlan.h"
#include "OnlineSoftmax.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/Passes.h"

#include <limits>

namespace megc {
#define GEN_PASS_DEF_MEGMAPKERNELSTOGPU
#include "megc/Kernels/Passes.h.inc"
} // namespace megc

using namespace mlir;

namespace megc {
namespace {

/// Threads of a warp on every NVIDIA GPU.
constexpr int64_t kWarpSize = 32;
/// Rows shorter than this reduce on one thread each: a warp would leave
/// most of its lanes idle.
constexpr int64_t kMinCooperativeRow = kWarpSize;

/// The bytes of a vector load or store: 128 bits, the widest a thread
/// issues.
constexpr int64_t kVectorBytes = 16;

/// A block's threads as the loops of its workgroup see them.
struct BlockThreads {
  gpu::LaunchOp launch;
  Value thread, lane, warp;
  int64_t threads, warps;
  /// Shared memory for one (maximum, sum) pair per warp: the warps' maxima,
  /// then their sums; made on first use.
  Value pairs;

  Value sharedPairs(Location loc) {
    if (!pairs) {
      MLIRContext *context = launch.getContext();
      auto type = MemRefType::get(
          {2 * warps}, Float32Type::get(context), MemRefLayoutAttrInterface(),
          gpu::AddressSpaceAttr::get(
              context, gpu::GPUDialect::getWorkgroupAddressSpace()));
      pairs = launch.addWorkgroupAttribution(type, loc);
    }
    return pairs;
  }
};

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

/// The indices of `linear` in the row-major iteration space `extents`.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<int64_t> extents) {
  SmallVector<Value> indices(extents.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(extents.size()) - 1; i >= 0; --i) {
    if (extents[i] == 1) {
      indices[i] = indexConstant(b, loc, 0);
      continue;
    }
    Value index = linear;
    if (stride > 1)
      index =
          arith::DivUIOp::create(b, loc, index, indexConstant(b, loc, stride));
    if (i > 0)
      index = arith::RemUIOp::create(b, loc, index,
                                     indexConstant(b, loc, extents[i]));
    indices[i] = index;
    stride *= extents[i];
  }
  return indices;
}

/// `map` applied to the loop indices `ivs`.
SmallVector<Value> applyMap(OpBuilder &b, Location loc, AffineMap map,
                            ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      indices.push_back(ivs[dim.getPosition()]);
    } else if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
      indices.push_back(indexConstant(b, loc, constant.getValue()));
    } else {
      AffineMap single =
          AffineMap::get(map.getNumDims(), map.getNumSymbols(), expr);
      indices.push_back(affine::AffineApplyOp::create(b, loc, single, ivs));
    }
  }
  return indices;
}

/// The block reduction that realises `combiner`, for the element types the
/// shuffles carry (32 bits).
std::optional<gpu::AllReduceOperation> reductionOf(Operation *combiner) {
  Type type = combiner->getResult(0).getType();
  if (!type.isF32() && !type.isInteger(32))
    return std::nullopt;
  using Kind = gpu::AllReduceOperation;
  if (isa<arith::AddFOp, arith::AddIOp>(combiner))
    return Kind::ADD;
  if (isa<arith::MulFOp, arith::MulIOp>(combiner))
    return Kind::MUL;
  if (isa<arith::MaximumFOp>(combiner))
    return Kind::MAXIMUMF;
  if (isa<arith::MinimumFOp>(combiner))
    return Kind::MINIMUMF;
  if (isa<arith::MaxNumFOp>(combiner))
    return Kind::MAXNUMF;
  if (isa<arith::MinNumFOp>(combiner))
    return Kind::MINNUMF;
  if (isa<arith::MaxSIOp>(combiner))
    return Kind::MAXSI;
  if (isa<arith::MinSIOp>(combiner))
    return Kind::MINSI;
  return std::nullopt;
}

/// One loop nest of a workgroup, emitted as loops over the block's threads.
class NestEmitter {
public:
  NestEmitter(linalg::LinalgOp nest, BlockThreads &block)
      : nest(nest), block(block), loc(nest.getLoc()),
        extents(nest.getStaticLoopRanges()) {
    SmallVector<utils::IteratorType> iterators = nest.getIteratorTypesArray();
    for (unsigned dim = 0; dim < iterators.size(); ++dim) {
      bool parallel = iterators[dim] == utils::IteratorType::parallel;
      (parallel ? parallelDims : reductionDims).push_back(dim);
      (parallel ? parallelExtents : reductionExtents).push_back(extents[dim]);
    }
  }

  void emit(OpBuilder &b) {
    if (reductionDims.empty())
      return emitPointwise(b);
    if (nest->hasAttr(meg::MegDialect::kOnlineSoftmaxAttrName) &&
        innermostReductionIsContiguous() &&
        product(reductionExtents) >= kMinCooperativeRow)
      return emitOnlineSoftmax(b, /*warpPerRow=*/product(parallelExtents) >=
                                      block.warps);
    FailureOr<Combiner> combiner = matchCombiner(nest);
    std::optional<gpu::AllReduceOperation> kind;
    if (succeeded(combiner))
      kind = reductionOf(combiner->op);
    // A thread per output element when the rows are short, or when the
    // reduction reads across rows and there are outputs enough for every
    // thread (a column reduction's partials): neighbouring threads then
    // read neighbouring elements. With fewer outputs than threads (the
    // combine of a few columns' partials), the threads share each output.
    int64_t outputs = product(parallelExtents);
    if (!kind || product(reductionExtents) < kMinCooperativeRow ||
        (!innermostReductionIsContiguous() && outputs >= block.threads))
      return emitThreadPerRow(b);
    emitCooperative(b, *combiner, *kind,
                    /*warpPerRow=*/outputs >= block.warps);
  }

private:
  static int64_t product(ArrayRef<int64_t> values) {
    int64_t total = 1;
    for (int64_t value : values)
      total *= value;
    return total;
  }

  /// The innermost loop reduces, and every input it moves through is read
  /// along its last (contiguous) dimension: lanes on neighbouring
  /// iterations read neighbouring elements.
  bool innermostReductionIsContiguous() {
    unsigned last = extents.size() - 1;
    if (reductionDims.empty() || reductionDims.back() != last)
      return false;
    AffineExpr lastDim = getAffineDimExpr(last, nest.getContext());
    for (OpOperand *input : nest.getDpsInputOperands()) {
      AffineMap map = nest.getMatchingIndexingMap(input);
      if (!map.isFunctionOfDim(last))
        continue;
      if (map.getNumResults() == 0 || map.getResults().back() != lastDim)
        return false;
    }
    return true;
  }

  /// Loop indices from the parallel and the reduction ones.
  SmallVector<Value> merge(ArrayRef<Value> parallel,
                           ArrayRef<Value> reduction) {
    SmallVector<Value> ivs(extents.size());
    for (auto [dim, iv] : llvm::zip(parallelDims, parallel))
      ivs[dim] = iv;
    for (auto [dim, iv] : llvm::zip(reductionDims, reduction))
      ivs[dim] = iv;
    return ivs;
  }

  /// Zero for every reduction index: outputs do not depend on them.
  SmallVector<Value> zeros(OpBuilder &b, size_t count) {
    return SmallVector<Value>(count, indexConstant(b, loc, 0));
  }

  /// The nest's body at iteration `ivs`: its operands loaded (the outputs'
  /// current values replaced by `accumulators` where given), its ops
  /// cloned; returns the values it yields.
  SmallVector<Value> point(OpBuilder &b, ArrayRef<Value> ivs,
                           ValueRange accumulators = {}) {
    Block &body = nest->getRegion(0).front();
    IRMapping mapping;
    for (OpOperand &operand : nest->getOpOperands()) {
      BlockArgument arg = nest.getMatchingBlockArgument(&operand);
      if (nest.isDpsInit(&operand) && !accumulators.empty()) {
        unsigned init = operand.getOperandNumber() - nest.getNumDpsInputs();
        mapping.map(arg, accumulators[init]);
        continue;
      }
      if (arg.use_empty())
        continue;
      Value source = operand.get();
      if (!isa<MemRefType>(source.getType())) {
        mapping.map(arg, source);
        continue;
      }
      SmallVector<Value> indices =
          applyMap(b, loc, nest.getMatchingIndexingMap(&operand), ivs);
      mapping.map(arg, memref::LoadOp::create(b, loc, source, indices));
    }
    for (Operation &op : body.without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(op)) {
        mapping.map(index.getResult(), ivs[index.getDim()]);
        continue;
      }
      b.clone(op, mapping);
    }
    SmallVector<Value> yielded;
    for (Value value : body.getTerminator()->getOperands())
      yielded.push_back(mapping.lookupOrDefault(value));
    return yielded;
  }

  void store(OpBuilder &b, ArrayRef<Value> ivs, ValueRange values) {
    for (auto [init, value] : llvm::zip(nest.getDpsInitsMutable(), values)) {
      SmallVector<Value> indices =
          applyMap(b, loc, nest.getMatchingIndexingMap(&init), ivs);
      memref::StoreOp::create(b, loc, value, init.get(), indices);
    }
  }

  SmallVector<Value> loadOutputs(OpBuilder &b, ArrayRef<Value> ivs) {
    SmallVector<Value> values;
    for (OpOperand &init : nest.getDpsInitsMutable())
      values.push_back(memref::LoadOp::create(
          b, loc, init.get(),
          applyMap(b, loc, nest.getMatchingIndexingMap(&init), ivs)));
    return values;
  }

  /// for (i = first; i < count; i += step) body(i).
  void stride(OpBuilder &b, Value first, int64_t count, int64_t step,
              function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(b, loc, first, indexConstant(b, loc, count),
                       indexConstant(b, loc, step), ValueRange(),
                       [&](OpBuilder &inner, Location, Value iv, ValueRange) {
                         body(inner, iv);
                         scf::YieldOp::create(inner, loc);
                       });
  }

  void emitPointwise(OpBuilder &b) {
    std::optional<int64_t> width = vectorWidth();
    if (!width)
      return emitElementwise(b);
    auto aligned = scf::IfOp::create(b, loc, vectorsAligned(b, *width),
                                     /*withElseRegion=*/true);
    OpBuilder vectors = aligned.getThenBodyBuilder();
    emitVectorized(vectors, *width);
    OpBuilder elements = aligned.getElseBodyBuilder();
    emitElementwise(elements);
  }

  void emitElementwise(OpBuilder &b) {
    stride(b, block.thread, product(parallelExtents), block.threads,
           [&](OpBuilder &inner, Value i) {
             SmallVector<Value> ivs =
                 delinearize(inner, loc, i, parallelExtents);
             store(inner, ivs, point(inner, ivs));
           });
  }

  /// How the innermost loop moves through `operand`: not at all (a value
  /// broadcast along it, or a scalar), or along the memref's contiguous
  /// last dimension; nullopt otherwise.
  enum class Along { None, Contiguous };
  std::optional<Along> along(OpOperand &operand) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type)
      return Along::None;
    unsigned last = extents.size() - 1;
    AffineMap map = nest.getMatchingIndexingMap(&operand);
    if (!map.isFunctionOfDim(last))
      return Along::None;
    AffineExpr lastDim = getAffineDimExpr(last, nest.getContext());
    for (AffineExpr result : map.getResults().drop_back())
      if (result.isFunctionOfDim(last))
        return std::nullopt;
    if (map.getResults().back() != lastDim)
      return std::nullopt;
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1 || !type.getElementType().isIntOrFloat() ||
        type.getElementTypeBitWidth() % 8 != 0)
      return std::nullopt;
    return Along::Contiguous;
  }

  /// Elements per vector when the nest can run on 128-bit vectors: every
  /// operand the innermost loop moves through is contiguous along it (the
  /// outputs all are), and its rows (the innermost extent, and every outer
  /// stride) split into whole vectors of the widest such element.
  std::optional<int64_t> vectorWidth() {
    if (extents.empty())
      return std::nullopt;
    int64_t widest = 0;
    for (OpOperand &operand : nest->getOpOperands()) {
      std::optional<Along> how = along(operand);
      if (!how || (*how == Along::None && nest.isDpsInit(&operand)))
        return std::nullopt;
      if (*how == Along::Contiguous)
        widest = std::max<int64_t>(
            widest,
            cast<MemRefType>(operand.get().getType()).getElementTypeBitWidth() /
                8);
    }
    if (widest == 0 || widest > kVectorBytes / 2)
      return std::nullopt;
    int64_t width = kVectorBytes / widest;
    if (extents.back() % width != 0)
      return std::nullopt;
    for (OpOperand &operand : nest->getOpOperands()) {
      if (along(operand) != Along::Contiguous)
        continue;
      auto type = cast<MemRefType>(operand.get().getType());
      SmallVector<int64_t> strides;
      int64_t offset;
      (void)type.getStridesAndOffset(strides, offset);
      for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
        if (ShapedType::isDynamic(stride) || stride % width != 0)
          return std::nullopt;
    }
    return width;
  }

  /// Bytes a vector of `width` elements of `operand` spans: its alignment.
  static int64_t vectorAlignment(OpOperand &operand, int64_t width) {
    return width *
           cast<MemRefType>(operand.get().getType()).getElementTypeBitWidth() /
           8;
  }

  /// Whether the first element of every contiguous operand (its aligned
  /// pointer plus its offset) is aligned to its vectors: with the strides
  /// whole vectors, so is every vector the threads touch.
  Value vectorsAligned(OpBuilder &b, int64_t width) {
    Value all = arith::ConstantIntOp::create(b, loc, 1, 1);
    Value zero = indexConstant(b, loc, 0);
    for (OpOperand &operand : nest->getOpOperands()) {
      if (along(operand) != Along::Contiguous)
        continue;
      Value memref = operand.get();
      auto type = cast<MemRefType>(memref.getType());
      Value pointer =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
      auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
      Value offsetBytes = arith::MulIOp::create(
          b, loc, metadata.getOffset(),
          indexConstant(b, loc, type.getElementTypeBitWidth() / 8));
      Value address = arith::AddIOp::create(b, loc, pointer, offsetBytes);
      Value misalignment = arith::RemUIOp::create(
          b, loc, address,
          indexConstant(b, loc, vectorAlignment(operand, width)));
      all = arith::AndIOp::create(
          b, loc, all,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, misalignment,
                                zero));
    }
    return all;
  }

  /// Thread t takes vectors t, t + T, ... of `width` elements along the
  /// innermost loop: contiguous operands are read and written as vectors,
  /// the others (broadcast along it) once per vector, and the body runs
  /// once per lane.
  void emitVectorized(OpBuilder &b, int64_t width) {
    unsigned last = extents.size() - 1;
    Block &body = nest->getRegion(0).front();
    stride(
        b, block.thread, product(parallelExtents) / width, block.threads,
        [&](OpBuilder &inner, Value v) {
          Value first = arith::MulIOp::create(inner, loc, v,
                                              indexConstant(inner, loc, width));
          SmallVector<Value> ivs =
              delinearize(inner, loc, first, parallelExtents);
          // Each operand the body reads, as a vector or a scalar.
          SmallVector<Value> loaded(nest->getNumOperands());
          for (OpOperand &operand : nest->getOpOperands()) {
            BlockArgument arg = nest.getMatchingBlockArgument(&operand);
            Value source = operand.get();
            if (arg.use_empty())
              continue;
            if (!isa<MemRefType>(source.getType())) {
              loaded[operand.getOperandNumber()] = source;
              continue;
            }
            SmallVector<Value> indices = applyMap(
                inner, loc, nest.getMatchingIndexingMap(&operand), ivs);
            if (along(operand) == Along::None) {
              loaded[operand.getOperandNumber()] =
                  memref::LoadOp::create(inner, loc, source, indices);
              continue;
            }
            auto vectorType = VectorType::get(
                {width}, cast<MemRefType>(source.getType()).getElementType());
            loaded[operand.getOperandNumber()] = vector::LoadOp::create(
                inner, loc, vectorType, source, indices, /*nontemporal=*/false,
                llvm::MaybeAlign(vectorAlignment(operand, width)));
          }
          SmallVector<SmallVector<Value>> lanes(nest.getNumDpsInits());
          for (int64_t lane = 0; lane < width; ++lane) {
            SmallVector<Value> laneIvs(ivs);
            laneIvs[last] = arith::AddIOp::create(
                inner, loc, ivs[last], indexConstant(inner, loc, lane));
            IRMapping mapping;
            for (OpOperand &operand : nest->getOpOperands()) {
              Value value = loaded[operand.getOperandNumber()];
              if (!value)
                continue;
              if (isa<VectorType>(value.getType()))
                value = vector::ExtractOp::create(inner, loc, value,
                                                  ArrayRef<int64_t>{lane});
              mapping.map(nest.getMatchingBlockArgument(&operand), value);
            }
            for (Operation &op : body.without_terminator()) {
              if (auto index = dyn_cast<linalg::IndexOp>(op)) {
                mapping.map(index.getResult(), laneIvs[index.getDim()]);
                continue;
              }
              inner.clone(op, mapping);
            }
            for (auto [init, value] :
                 llvm::enumerate(body.getTerminator()->getOperands()))
              lanes[init].push_back(mapping.lookupOrDefault(value));
          }
          for (auto [init, values] :
               llvm::zip(nest.getDpsInitsMutable(), lanes)) {
            auto vectorType = VectorType::get(
                {width},
                cast<MemRefType>(init.get().getType()).getElementType());
            Value vector =
                vector::FromElementsOp::create(inner, loc, vectorType, values);
            vector::StoreOp::create(
                inner, loc, vector, init.get(),
                applyMap(inner, loc, nest.getMatchingIndexingMap(&init), ivs),
                /*nontemporal=*/false,
                llvm::MaybeAlign(vectorAlignment(init, width)));
          }
        });
  }

  /// The reduction of one output element on one thread, in loop order;
  /// the outputs stay in registers when no output is indexed by a
  /// reduction dimension.
  void emitThreadPerRow(OpBuilder &b) {
    bool registers =
        llvm::none_of(nest.getDpsInitsMutable(), [&](OpOperand &init) {
          AffineMap map = nest.getMatchingIndexingMap(&init);
          return llvm::any_of(reductionDims, [&](unsigned dim) {
            return map.isFunctionOfDim(dim);
          });
        });
    int64_t rows = product(parallelExtents);
    int64_t length = product(reductionExtents);
    stride(b, block.thread, rows, block.threads, [&](OpBuilder &b, Value p) {
      SmallVector<Value> row = delinearize(b, loc, p, parallelExtents);
      if (!registers) {
        stride(b, indexConstant(b, loc, 0), length, 1,
               [&](OpBuilder &b, Value r) {
                 SmallVector<Value> ivs =
                     merge(row, delinearize(b, loc, r, reductionExtents));
                 store(b, ivs, point(b, ivs));
               });
        return;
      }
      SmallVector<Value> outIvs = merge(row, zeros(b, reductionDims.size()));
      auto loop = scf::ForOp::create(
          b, loc, indexConstant(b, loc, 0), indexConstant(b, loc, length),
          indexConstant(b, loc, 1), loadOutputs(b, outIvs),
          [&](OpBuilder &b, Location, Value r, ValueRange accumulators) {
            SmallVector<Value> ivs =
                merge(row, delinearize(b, loc, r, reductionExtents));
            scf::YieldOp::create(b, loc, point(b, ivs, accumulators));
          });
      store(b, outIvs, loop.getResults());
    });
  }

  /// How rows are shared out: a warp per row (warp w takes rows w, w + W,
  /// ...; its lanes stride over the row by 32) or a block per row (every
  /// row in turn; the threads stride over it by the block's size).
  struct RowSplit {
    Value rowStart, laneStart;
    int64_t rowStep, laneStep;
  };

  RowSplit rowSplit(OpBuilder &b, bool warpPerRow) {
    if (warpPerRow)
      return {block.warp, block.lane, block.warps, kWarpSize};
    return {indexConstant(b, loc, 0), block.thread, 1, block.threads};
  }

  /// body(row indices) for each of this warp's or block's rows.
  void eachRow(OpBuilder &b, const RowSplit &split,
               function_ref<void(OpBuilder &, ArrayRef<Value>)> body) {
    stride(b, split.rowStart, product(parallelExtents), split.rowStep,
           [&](OpBuilder &b, Value p) {
             body(b, delinearize(b, loc, p, parallelExtents));
           });
  }

  /// A lane's part of `row`: the nest's body over the lane's iterations of
  /// the reduction, its outputs carried from `initial`; their final values.
  SmallVector<Value> laneLoop(OpBuilder &b, const RowSplit &split,
                              ArrayRef<Value> row, ValueRange initial) {
    auto lanes = scf::ForOp::create(
        b, loc, split.laneStart,
        indexConstant(b, loc, product(reductionExtents)),
        indexConstant(b, loc, split.laneStep), initial,
        [&](OpBuilder &b, Location, Value r, ValueRange partial) {
          SmallVector<Value> ivs =
              merge(row, delinearize(b, loc, r, reductionExtents));
          scf::YieldOp::create(b, loc, point(b, ivs, partial));
        });
    return SmallVector<Value>(lanes.getResults());
  }

  /// Rows reduced by a warp or a block each: the lanes stride over the row
  /// from the reduction's neutral element, their partials are combined by
  /// a subgroup or block reduction, and the first lane folds the total
  /// into the output's value.
  void emitCooperative(OpBuilder &b, const Combiner &combiner,
                       gpu::AllReduceOperation kind, bool warpPerRow) {
    RowSplit split = rowSplit(b, warpPerRow);
    BlockArgument output =
        nest.getMatchingBlockArgument(nest.getDpsInitOperand(0));

    eachRow(b, split, [&](OpBuilder &b, ArrayRef<Value> row) {
      Value neutral = arith::ConstantOp::create(b, loc, combiner.neutral);
      Value partial = laneLoop(b, split, row, ValueRange{neutral}).front();
      Value total;
      if (warpPerRow) {
        total = gpu::SubgroupReduceOp::create(b, loc, partial, kind,
                                              /*uniform=*/true);
      } else {
        total = gpu::AllReduceOp::create(
            b, loc, partial,
            gpu::AllReduceOperationAttr::get(b.getContext(), kind),
            b.getUnitAttr());
        // Every thread has read the total from the reduction's
        // shared buffer before the next row writes it.
        gpu::BarrierOp::create(b, loc);
      }
      onFirstLane(b, split.laneStart, [&](OpBuilder &then) {
        SmallVector<Value> outIvs =
            merge(row, zeros(then, reductionDims.size()));
        Value current = loadOutputs(then, outIvs).front();
        IRMapping fold;
        for (Value operand : combiner.op->getOperands())
          fold.map(operand, operand == output ? current : total);
        Value folded = then.clone(*combiner.op, fold)->getResult(0);
        store(then, outIvs, folded);
      });
    });
  }

  /// A row's maximum and sum of exponentials (a meg.online_softmax nest:
  /// outputs 0 and 1) over a warp or a block: each lane folds its elements
  /// into a pair from (-inf, 0) with the nest's body, the lanes' pairs meet
  /// in a butterfly of xor shuffles, and, for a block, the warps' pairs in
  /// shared memory, which the first thread folds in warp order; the first
  /// lane folds the row's pair into the outputs. Every combine is
  /// combineSoftmaxStatistics, the nest's own step.
  void emitOnlineSoftmax(OpBuilder &b, bool warpPerRow) {
    RowSplit split = rowSplit(b, warpPerRow);
    Value shared = warpPerRow ? Value() : block.sharedPairs(loc);

    eachRow(
        b, split, [&](OpBuilder &b, ArrayRef<Value> row) {
          Value negInf = arith::ConstantOp::create(
              b, loc,
              b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
          Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
          SmallVector<Value> lanes =
              laneLoop(b, split, row, ValueRange{negInf, zero});
          SoftmaxStatistics pair = warpCombine(b, {lanes[0], lanes[1]});
          if (warpPerRow) {
            onFirstLane(b, split.laneStart, [&](OpBuilder &then) {
              foldIntoOutputs(then, row, pair);
            });
            return;
          }
          Value warpsValue = indexConstant(b, loc, block.warps);
          onFirstLane(b, block.lane, [&](OpBuilder &then) {
            memref::StoreOp::create(then, loc, pair.max, shared,
                                    ValueRange{block.warp});
            Value sumAt =
                arith::AddIOp::create(then, loc, block.warp, warpsValue);
            memref::StoreOp::create(then, loc, pair.sum, shared,
                                    ValueRange{sumAt});
          });
          gpu::BarrierOp::create(b, loc);
          onFirstLane(b, block.thread, [&](OpBuilder &then) {
            Value first = indexConstant(then, loc, 0);
            Value start = memref::LoadOp::create(then, loc, shared, first);
            Value startSum = memref::LoadOp::create(then, loc, shared,
                                                    ValueRange{warpsValue});
            auto warps = scf::ForOp::create(
                then, loc, indexConstant(then, loc, 1), warpsValue,
                indexConstant(then, loc, 1), ValueRange{start, startSum},
                [&](OpBuilder &b, Location, Value w, ValueRange total) {
                  Value max = memref::LoadOp::create(b, loc, shared, w);
                  Value sumAt = arith::AddIOp::create(b, loc, w, warpsValue);
                  Value sum = memref::LoadOp::create(b, loc, shared, sumAt);
                  SoftmaxStatistics next = combineSoftmaxStatistics(
                      b, loc, {total[0], total[1]}, {max, sum});
                  scf::YieldOp::create(b, loc, ValueRange{next.max, next.sum});
                });
            foldIntoOutputs(then, row,
                            {warps.getResult(0), warps.getResult(1)});
          });
          // The first thread has read every warp's pair before the next row
          // writes them.
          gpu::BarrierOp::create(b, loc);
        });
  }

  /// The pairs of a warp's lanes combined, in every lane: xor shuffles at
  /// distances 1, 2, ..., 16.
  SoftmaxStatistics warpCombine(OpBuilder &b, SoftmaxStatistics pair) {
    for (int32_t offset = 1; offset < kWarpSize; offset *= 2) {
      Value max = gpu::ShuffleOp::create(b, loc, pair.max, offset, kWarpSize,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
      Value sum = gpu::ShuffleOp::create(b, loc, pair.sum, offset, kWarpSize,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
      pair = combineSoftmaxStatistics(b, loc, pair, {max, sum});
    }
    return pair;
  }

  /// body() on the thread whose `index` is zero.
  void onFirstLane(OpBuilder &b, Value index,
                   function_ref<void(OpBuilder &)> body) {
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, index,
                                        indexConstant(b, loc, 0));
    auto onFirst = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
    OpBuilder then = onFirst.getThenBodyBuilder();
    body(then);
  }

  /// The row's outputs (maximum, sum) combined with `pair`.
  void foldIntoOutputs(OpBuilder &b, ArrayRef<Value> row,
                       SoftmaxStatistics pair) {
    SmallVector<Value> outIvs = merge(row, zeros(b, reductionDims.size()));
    SmallVector<Value> current = loadOutputs(b, outIvs);
    SoftmaxStatistics folded =
        combineSoftmaxStatistics(b, loc, {current[0], current[1]}, pair);
    store(b, outIvs, ValueRange{folded.max, folded.sum});
  }

  linalg::LinalgOp nest;
  BlockThreads &block;
  Location loc;
  SmallVector<int64_t> extents;
  SmallVector<unsigned> parallelDims, reductionDims;
  SmallVector<int64_t> parallelExtents, reductionExtents;
};

/// What an op does to memory: nothing, reads only, or more (writes,
/// allocations, or effects it does not declare).
enum class MemoryUse { None, Read, Write };

MemoryUse memoryUse(Operation *op) {
  if (isMemoryEffectFree(op))
    return MemoryUse::None;
  std::optional<SmallVector<MemoryEffects::EffectInstance>> effects =
      getEffectsRecursively(op);
  if (!effects)
    return MemoryUse::Write;
  for (const MemoryEffects::EffectInstance &effect : *effects)
    if (!isa<MemoryEffects::Read>(effect.getEffect()))
      return MemoryUse::Write;
  return effects->empty() ? MemoryUse::None : MemoryUse::Read;
}

/// Loop nests that the block's threads share: static, on buffers.
linalg::LinalgOp sharedNest(Operation *op) {
  auto nest = dyn_cast<linalg::LinalgOp>(op);
  if (!nest || !nest.hasPureBufferSemantics() ||
      llvm::is_contained(nest.getStaticLoopRanges(), ShapedType::kDynamic))
    return nullptr;
  return nest;
}

/// Whether `a` and `b` are the same view: the same value, or subviews of
/// one source with the same offsets, sizes and strides.
bool sameView(Value a, Value b) {
  if (a == b)
    return true;
  auto left = a.getDefiningOp<memref::SubViewOp>();
  auto right = b.getDefiningOp<memref::SubViewOp>();
  return left && right && left.getSource() == right.getSource() &&
         left.getType() == right.getType() &&
         left.getMixedOffsets() == right.getMixedOffsets() &&
         left.getMixedSizes() == right.getMixedSizes() &&
         left.getMixedStrides() == right.getMixedStrides();
}

/// Tiles that two or more loop nests of a dispatch read and none writes
/// (the rows a norm reduces and then scales, the logits a cross-entropy
/// reduces and then differentiates), copied once from global memory into
/// shared memory by the block's threads, and read from there by every
/// nest: the dispatch reads them from memory once. The tiles that save the
/// most reads go first while they fit in `budget` bytes.
class TileStager {
public:
  TileStager(Block &body, BlockThreads &block, int64_t budget)
      : body(body), block(block), budget(budget) {}

  void run() {
    if (budget <= 0 || !collect())
      return;
    llvm::stable_sort(tiles, [](const Tile &a, const Tile &b) {
      return a.saved() > b.saved();
    });
    int64_t used = 0;
    for (Tile &tile : tiles) {
      if (tile.readers.size() < 2 || used + tile.bytes > budget)
        continue;
      used += tile.bytes;
      stage(tile);
    }
  }

private:
  /// One view and the nests that read it (operands of each).
  struct Tile {
    Value view;
    MemRefType type;
    int64_t bytes;
    SmallVector<linalg::LinalgOp> readers;
    SmallVector<OpOperand *> operands;
    int64_t saved() const {
      return bytes * static_cast<int64_t>(readers.size() - 1);
    }
  };

  /// Gathers the candidate tiles; false when the dispatch has a step that
  /// may write memory that is not a loop nest's output (a serial step, a
  /// scatter in a nest's body): then no tile is known to be unwritten.
  bool collect() {
    llvm::DenseSet<Value> written;
    SmallVector<linalg::LinalgOp> nests;
    for (Operation &op : body.without_terminator()) {
      MemoryUse use = memoryUse(&op);
      linalg::LinalgOp nest = sharedNest(&op);
      if (!nest) {
        if (use == MemoryUse::Write)
          return false;
        continue;
      }
      bool scatters = false;
      nest->walk([&](Operation *inner) {
        scatters |= inner != nest.getOperation() &&
                    memoryUse(inner) == MemoryUse::Write;
      });
      if (scatters)
        return false;
      for (OpOperand &init : nest.getDpsInitsMutable())
        written.insert(baseOf(init.get()));
      nests.push_back(nest);
    }
    for (linalg::LinalgOp nest : nests) {
      for (OpOperand *input : nest.getDpsInputOperands()) {
        auto type = dyn_cast<MemRefType>(input->get().getType());
        if (!type || !type.hasStaticShape() ||
            !type.getElementType().isIntOrFloat() ||
            type.getElementTypeBitWidth() % 8 != 0 ||
            written.contains(baseOf(input->get())) ||
            nest.getMatchingBlockArgument(input).use_empty())
          continue;
        Tile &tile = tileOf(input->get(), type);
        if (tile.readers.empty() || tile.readers.back() != nest)
          tile.readers.push_back(nest);
        tile.operands.push_back(input);
      }
    }
    return true;
  }

  Tile &tileOf(Value view, MemRefType type) {
    for (Tile &tile : tiles)
      if (sameView(tile.view, view))
        return tile;
    int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
    tiles.push_back({view, type, bytes, {}, {}});
    return tiles.back();
  }

  /// The tile's shared copy, filled by a copy nest before its first reader,
  /// which every reader then reads.
  void stage(Tile &tile) {
    MLIRContext *context = body.getParentOp()->getContext();
    Location loc = tile.readers.front().getLoc();
    auto sharedType = MemRefType::get(
        tile.type.getShape(), tile.type.getElementType(),
        MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(
            context, gpu::GPUDialect::getWorkgroupAddressSpace()));
    Value shared = block.launch.addWorkgroupAttribution(sharedType, loc);
    OpBuilder b(tile.readers.front());
    linalg::CopyOp::create(b, loc, tile.view, shared);
    for (OpOperand *operand : tile.operands)
      operand->set(shared);
  }

  Block &body;
  BlockThreads &block;
  int64_t budget;
  SmallVector<Tile> tiles;
};

class DispatchMapper {
public:
  DispatchMapper(func::FuncOp kernel, int64_t threads, int64_t stageBytes)
      : kernel(kernel), threads(threads), stageBytes(stageBytes) {}

  LogicalResult run() {
    for (Operation &op : kernel.getBody().front()) {
      if (isa<linalg::LinalgOp>(op))
        return op.emitError()
               << "kernel '" << kernel.getName()
               << "' has a loop nest outside its dispatches; run "
                  "meg-distribute-workgroups first";
    }
    SmallVector<scf::ForallOp> dispatches(
        kernel.getBody().front().getOps<scf::ForallOp>());
    for (scf::ForallOp forall : dispatches)
      if (failed(map(forall)))
        return failure();
    return success();
  }

private:
  InFlightDiagnostic error(Operation *op) {
    return op->emitError() << "cannot run on a GPU: kernel '"
                           << kernel.getName() << "' ";
  }

  LogicalResult map(scf::ForallOp forall) {
    std::optional<SmallVector<int64_t>> bounds =
        getConstantIntValues(forall.getMixedUpperBound());
    if (forall.getRank() != 1 || !bounds || (*bounds)[0] < 1 ||
        !forall.isNormalized())
      return error(forall) << "has a dispatch that is not a normalized "
                              "one-dimensional forall of constant size";
    Location loc = forall.getLoc();
    OpBuilder b(forall);
    Value one = indexConstant(b, loc, 1);
    auto launch =
        gpu::LaunchOp::create(b, loc, indexConstant(b, loc, (*bounds)[0]), one,
                              one, indexConstant(b, loc, threads), one, one);
    Block &body = launch.getBody().front();
    b.setInsertionPointToEnd(&body);
    Operation *terminator = gpu::TerminatorOp::create(b, loc);
    for (Operation &op :
         llvm::make_early_inc_range(forall.getBody()->without_terminator()))
      op.moveBefore(terminator);
    forall.getInductionVar(0).replaceAllUsesWith(launch.getBlockIds().x);
    forall.erase();

    b.setInsertionPointToStart(&body);
    BlockThreads block;
    block.launch = launch;
    block.thread = launch.getThreadIds().x;
    block.threads = threads;
    block.warps = threads / kWarpSize;
    Value warpSize = indexConstant(b, loc, kWarpSize);
    block.lane = arith::RemUIOp::create(b, loc, block.thread, warpSize);
    block.warp = arith::DivUIOp::create(b, loc, block.thread, warpSize);
    TileStager(body, block, stageBytes).run();

    SmallVector<Operation *> steps;
    for (Operation &op : body.without_terminator())
      steps.push_back(&op);
    bool written = false;
    for (Operation *op : steps) {
      MemoryUse use = memoryUse(op);
      if (use == MemoryUse::None)
        continue;
      b.setInsertionPoint(op);
      if (written)
        gpu::BarrierOp::create(b, op->getLoc());
      written = use == MemoryUse::Write;
      if (isa<memref::AllocOp, memref::AllocaOp>(op))
        return error(op) << "allocates inside a dispatch";
      if (linalg::LinalgOp nest = sharedNest(op)) {
        NestEmitter(nest, block).emit(b);
        op->erase();
        continue;
      }
      if (use == MemoryUse::Write && failed(onFirstThread(op, block)))
        return failure();
    }
    return success();
  }

  /// Runs `op` (a step that is not a loop nest the threads can share) on
  /// the block's first thread, its loop nests as serial loops.
  LogicalResult onFirstThread(Operation *op, const BlockThreads &block) {
    for (Value result : op->getResults())
      if (!result.use_empty())
        return error(op) << "has a step whose results later steps read";
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        block.thread, indexConstant(b, loc, 0));
    auto onFirst = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
    op->moveBefore(onFirst.thenBlock()->getTerminator());
    SmallVector<linalg::LinalgOp> nests;
    op->walk([&](linalg::LinalgOp nest) { nests.push_back(nest); });
    if (auto nest = dyn_cast<linalg::LinalgOp>(op))
      nests.push_back(nest);
    IRRewriter rewriter(op->getContext());
    for (linalg::LinalgOp nest : nests) {
      rewriter.setInsertionPoint(nest);
      if (failed(linalg::linalgOpToLoops(rewriter, nest)))
        return error(nest) << "has a loop nest that cannot become loops";
      rewriter.eraseOp(nest);
    }
    return success();
  }

  func::FuncOp kernel;
  int64_t threads;
  int64_t stageBytes;
};

/// Clones the constants (memref.get_global) that a gpu.launch reads into
/// its body, so that outlining copies the globals into the device module.
void sinkGlobalsIntoLaunches(ModuleOp kernels) {
  SmallVector<memref::GetGlobalOp> globals;
  kernels.walk([&](memref::GetGlobalOp op) {
    if (!op->getParentOfType<gpu::LaunchOp>())
      globals.push_back(op);
  });
  for (memref::GetGlobalOp global : globals) {
    llvm::DenseMap<Operation *, Value> copies;
    for (OpOperand &use : llvm::make_early_inc_range(global->getUses())) {
      auto launch = use.getOwner()->getParentOfType<gpu::LaunchOp>();
      if (!launch)
        continue;
      Value &copy = copies[launch];
      if (!copy) {
        OpBuilder builder = OpBuilder::atBlockBegin(&launch.getBody().front());
        copy = builder.clone(*global)->getResult(0);
      }
      use.set(copy);
    }
    if (global->use_empty())
      global->erase();
  }
}

struct MegMapKernelsToGpuPass
    : public impl::MegMapKernelsToGpuBase<MegMapKernelsToGpuPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *context) override {
    if (threadsPerBlock < kWarpSize || threadsPerBlock % kWarpSize != 0 ||
        threadsPerBlock > 1024)
      return emitError(UnknownLoc::get(context))
             << "meg-map-kernels-to-gpu: threads-per-block "
             << static_cast<unsigned>(threadsPerBlock)
             << " is not a multiple of " << kWarpSize << " up to 1024";
    if (stageBytes < 0)
      return emitError(UnknownLoc::get(context))
             << "meg-map-kernels-to-gpu: stage-bytes "
             << static_cast<int64_t>(stageBytes) << " is negative";
    return success();
  }

  void runOnOperation() override {
    ModuleOp kernels = getOperation();
    for (auto kernel : kernels.getOps<func::FuncOp>())
      if (failed(DispatchMapper(kernel, threadsPerBlock, stageBytes).run()))
        return signalPassFailure();
    OpPassManager cleanup(ModuleOp::getOperationName());
    OpPassManager &perKernel = cleanup.nest<func::FuncOp>();
    perKernel.addPass(createCanonicalizerPass());
    perKernel.addPass(createGpuLaunchSinkIndexComputationsPass());
    if (failed(runPipeline(cleanup, kernels)))
      return signalPassFailure();
    sinkGlobalsIntoLaunches(kernels);
  }
};

} // namespace
} // namespace megc
