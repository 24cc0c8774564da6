//===- IndexBounds.cpp - what integer inputs index ---===//
//
// The bound of each integer entry input: the rows of the embedding table it
// looks up or the classes of the cross-entropy it labels, through views,
// gathers and regions, and the label those losses ignore; the runtime
// checks every input against it.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

namespace megc {

/// The tightest table an integer input indexes, through views, slices and
/// graph regions and fusions: the rows of an embedding it looks up, the classes
/// of a cross-entropy it labels; and the label those cross-entropies ignore, if
/// every use that indexes with it ignores the same one.
/// The parameter an embedding table is read from, through the gathers and
/// reshapes of FSDP and the regions that pass it in; null if none.
static ParamOp tableParam(Value table) {
  for (int step = 0; step < 16 && table; ++step) {
    if (auto arg = dyn_cast<BlockArgument>(table)) {
      Operation *owner = arg.getOwner()->getParentOp();
      if (auto region = dyn_cast<GraphRegionOp>(owner))
        table = region.getInputs()[arg.getArgNumber()];
      else if (auto fusion = dyn_cast<FusionOp>(owner))
        table = fusion.getInputs()[arg.getArgNumber()];
      else
        return {};
      continue;
    }
    Operation *def = table.getDefiningOp();
    if (auto ref = dyn_cast<ParamRefOp>(def))
      return SymbolTable::lookupNearestSymbolFrom<ParamOp>(ref,
                                                           ref.getNameAttr());
    if (auto wait = dyn_cast<WaitOp>(def))
      def = wait.getFuture().getDefiningOp();
    if (!def || !isa<ReshapeOp, SliceOp, AllGatherOp, AllGatherStartOp>(def))
      return {};
    table = def->getOperand(0);
  }
  return {};
}

void ProgramBuilder::indexBoundOf(Value input, TensorSpec &spec) {
  std::optional<int64_t> ignore;
  bool everyUseIgnores = true;
  auto ignoring = [&](std::optional<int64_t> index) {
    if (!index || (ignore && *ignore != *index))
      everyUseIgnores = false;
    ignore = index;
  };
  auto bound = [&](int64_t size, StringRef use) {
    if (spec.indexBound == 0 || size < spec.indexBound) {
      spec.indexBound = size;
      spec.indexUse = use.str();
    }
  };
  std::function<void(Value)> visit = [&](Value value) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      auto dim = [](Value tensor, int64_t axis) {
        auto type = cast<RankedTensorType>(tensor.getType());
        return type.getDimSize(axis < 0 ? type.getRank() + axis : axis);
      };
      if (isa<ReshapeOp, SliceOp>(user)) {
        visit(user->getResult(0));
      } else if (auto region = dyn_cast<GraphRegionOp>(user)) {
        visit(region.getBody().front().getArgument(
            use.getOperandNumber() -
            region.getInputs().getBeginOperandIndex()));
      } else if (auto fusion = dyn_cast<FusionOp>(user)) {
        visit(fusion.getBody().front().getArgument(
            use.getOperandNumber() -
            fusion.getInputs().getBeginOperandIndex()));
      } else if (auto embedding = dyn_cast<EmbeddingOp>(user)) {
        if (use.get() == embedding.getIds()) {
          // A block of a vocab-parallel table: the whole table's rows.
          int64_t rows = dim(embedding.getTable(), 0);
          if (embedding.getFirstRow())
            if (ParamOp param = tableParam(embedding.getTable()))
              rows = param.getFullShape()[0];
          bound(rows, "rows of the embedding table");
          ignoring(std::nullopt);
        }
      } else if (auto stats = dyn_cast<VocabShardStatsOp>(user)) {
        if (use.get() == stats.getLabels()) {
          bound(stats.getVocab(), "classes of the cross-entropy");
          ignoring(stats.getIgnoreIndex());
        }
      } else if (auto loss = dyn_cast<CrossEntropyOp>(user)) {
        if (use.get() == loss.getLabels()) {
          bound(dim(loss.getLogits(), -1), "classes of the cross-entropy");
          ignoring(loss.getIgnoreIndex());
        }
      } else if (auto lossGrad = dyn_cast<CrossEntropyGradOp>(user)) {
        if (use.get() == lossGrad.getLabels()) {
          bound(dim(lossGrad.getLogits(), -1), "classes of the cross-entropy");
          ignoring(lossGrad.getIgnoreIndex());
        }
      }
    }
  };
  visit(input);
  if (spec.indexBound > 0 && everyUseIgnores)
    spec.indexIgnore = ignore;
}

} // namespace megc
