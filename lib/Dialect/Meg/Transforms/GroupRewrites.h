//===- GroupRewrites.h - helpers of the passes that lay out over groups -*-===//
//
// Shared by the passes that lay a model out over a group of mesh axes
// (meg-tensor-parallel, meg-context-parallel, the pipeline passes): the
// group's size and its registration, collectives along any dimension (the
// runtime's move contiguous pieces along dim 0), and the layer tag of the
// ops a rewrite inserts.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_TRANSFORMS_GROUPREWRITES_H
#define MEGC_LIB_DIALECT_MEG_TRANSFORMS_GROUPREWRITES_H

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/Builders.h"

#include <utility>

namespace mlir::meg {

/// The ranks of the group of `axes` of `mesh` (an axis it lacks counts 1).
inline int64_t groupRanks(MeshOp mesh, ArrayAttr axes) {
  int64_t ranks = 1;
  for (Attribute axis : axes)
    ranks *= mesh.getAxisSize(cast<StringAttr>(axis).getValue()).value_or(1);
  return ranks;
}

/// Registers the group of `axes` of `mesh` (a meg.submesh after the last
/// one) unless the module has.
inline void registerSubmesh(ModuleOp module, MeshOp mesh,
                            FlatSymbolRefAttr meshRef, ArrayAttr axes) {
  for (auto submesh : module.getOps<SubmeshOp>())
    if (submesh.getMeshAttr() == meshRef && submesh.getAxesAttr() == axes)
      return;
  OpBuilder builder(module.getContext());
  Operation *after = mesh;
  for (auto submesh : module.getOps<SubmeshOp>())
    after = submesh;
  builder.setInsertionPointAfter(after);
  SubmeshOp::create(builder, mesh.getLoc(), meshRef, axes);
}

/// The permutation that brings `dim` to the front, and its inverse.
inline std::pair<SmallVector<int64_t>, SmallVector<int64_t>>
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
Value alongDim(OpBuilder &builder, Value value, int64_t dim, int64_t times,
               int64_t over, Build build) {
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

/// Tags the ops it sees inserted with the transformer layer (`meg.layer`)
/// of the op they are built for. The positioning calls take that layer
/// from where they place the builder (which listens to this tagger).
struct LayerTagger : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (layer)
      op->setAttr(MegDialect::kLayerAttrName, layer);
  }
  /// Before `anchor`, in its layer.
  void at(OpBuilder &builder, Operation *anchor) {
    layer = anchor->getAttr(MegDialect::kLayerAttrName);
    builder.setInsertionPoint(anchor);
  }
  /// After `anchor`, in its layer.
  void after(OpBuilder &builder, Operation *anchor) {
    layer = anchor->getAttr(MegDialect::kLayerAttrName);
    builder.setInsertionPointAfter(anchor);
  }
  /// Right after `value`'s definition (a block argument: its block's
  /// start, in no layer).
  void afterValue(OpBuilder &builder, Value value) {
    if (Operation *def = value.getDefiningOp())
      return after(builder, def);
    layer = {};
    builder.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
  }
  Attribute layer;
};

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_TRANSFORMS_GROUPREWRITES_H
