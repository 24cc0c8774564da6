//===- RegionBody.h - filling isolated meg regions --------------*- C++ -*-===//
//
// meg.fusion and meg.graph_region are isolated from above: their body takes
// every outside value as a block argument and clones what it needs.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_DIALECT_MEG_TRANSFORMS_REGIONBODY_H
#define MEGC_LIB_DIALECT_MEG_TRANSFORMS_REGIONBODY_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::meg {

/// Creates the single block of `body` with one argument per input, maps
/// each input to its argument, clones `cloned` (constants, parameter
/// references) into the block and leaves `builder` after them.
inline void beginRegionBody(Region &body, ValueRange inputs,
                            ArrayRef<Operation *> cloned, OpBuilder &builder,
                            IRMapping &mapping) {
  Block &block = body.emplaceBlock();
  for (Value input : inputs)
    mapping.map(input, block.addArgument(input.getType(), input.getLoc()));
  builder.setInsertionPointToStart(&block);
  for (Operation *op : cloned)
    builder.clone(*op, mapping);
}

} // namespace mlir::meg

#endif // MEGC_LIB_DIALECT_MEG_TRANSFORMS_REGIONBODY_H
