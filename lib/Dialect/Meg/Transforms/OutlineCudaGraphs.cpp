//===- OutlineCudaGraphs.cpp - the meg-outline-cuda-graphs pass --------===//
//
// Cuts each public function's body into runs of capturable ops (one run
// per step, or one per layer phase) and wraps each run in a
// meg.graph_region. Parameter references and constants that a run reads
// are cloned into it, so a region's operands are the activations it reads.
//
//===----------------------------------------------------------------------===//

#include "RegionBody.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace mlir::meg {
#define GEN_PASS_DEF_MEGOUTLINECUDAGRAPHS
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

/// Ops that are copied into every region that reads them instead of being
/// passed in: they name storage or values, they compute nothing.
bool isClonedIntoRegions(Operation *op) {
  return isa<ParamRefOp>(op) || op->hasTrait<OpTrait::ConstantLike>();
}

/// Why `op` cannot be captured in a graph, or empty if it can.
StringRef notCapturable(Operation *op, bool captureCollectives) {
  if (isa<CollectiveOpInterface, WaitOp>(op) &&
      !captureCollectives)
    return "collectives are captured only with capture-collectives";
  // meg-async-collectives, which runs after the outlining, starts and
  // waits inside one region; a pair already split (meg-fsdp's prefetch of
  // the next layer's weights) spans regions.
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (isa<ShiftOp>(op))
    return "a shift's exchange with the neighbouring ranks is not captured";
  if ((collective && collective.isStarted()) || isa<WaitOp>(op))
    return "a started collective and its wait are not captured (they may "
           "fall in different graphs)";
  if (isa<func::CallOp>(op))
    return "calls must be inlined first";
  if (isa<GraphRegionOp>(op))
    return "already in a graph region";
  if (op->getNumRegions() != 0 && !isa<FusionOp>(op))
    return "ops with regions other than fusions are not captured";
  return {};
}

/// Layer of an op that reads no parameter: it goes with the op before it.
constexpr int64_t kNoParameter = -2;

/// A layer's runs in the order they appear: its forward, its backward and
/// its optimizer work; later ones are numbered parts.
constexpr unsigned kForward = 0, kBackward = 1;
const char *const kLayerParts[] = {"forward", "backward", "optimizer"};

struct Run {
  SmallVector<Operation *> ops;
  std::string name;
  int64_t layer = -1;
  /// Which of its layer's runs this is (kForward, kBackward, ...); none for
  /// a step run.
  std::optional<unsigned> occurrence;
  /// Which part of its function (a step run's index) or of its layer (the
  /// phase, or the occurrence after the optimizer's) the run is: regions
  /// share I/O buffers only with the previous region of the same part.
  std::string part;
};

struct MegOutlineCudaGraphsPass
    : public mlir::meg::impl::MegOutlineCudaGraphsBase<
          MegOutlineCudaGraphsPass> {
  using MegOutlineCudaGraphsBase::MegOutlineCudaGraphsBase;

  void runOnOperation() override {
    if (scope != "step" && scope != "layer") {
      getOperation().emitError()
          << "meg-outline-cuda-graphs: unknown scope '" << scope
          << "'; expected step or layer";
      return signalPassFailure();
    }
    // A parameter's layer is the one its builder recorded (meg.layer).
    for (auto param : getOperation().getOps<ParamOp>())
      paramLayer[param.getSymNameAttr()] = param.getLayer().value_or(-1);
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        outlineFunction(func);
  }

  void outlineFunction(func::FuncOp func) {
    SmallVector<Run> runs = scope == "step" ? stepRuns(func) : layerRuns(func);
    bool hasBackward = false;
    llvm::DenseSet<int64_t> layersWithBackward;
    for (const Run &run : runs)
      if (run.occurrence == kBackward) {
        hasBackward = true;
        layersWithBackward.insert(run.layer);
      }
    GraphRegionOp previous;
    const Run *previousRun = nullptr;
    for (Run &run : runs) {
      GraphRegionOp region = outline(run);
      if (!region)
        continue;
      // A frozen layer still has a backward when gradients must pass
      // through it to trainable layers before it.
      if (scope == "layer" && hasBackward && run.occurrence == kForward &&
          !layerTrains(run.layer) && !layersWithBackward.contains(run.layer))
        region.setForwardOnly(true);
      if (shareIoBuffers && previous && region->getNumResults() == 1 &&
          previous->getNumResults() == 1 &&
          llvm::is_contained(region.getInputs(), previous->getResult(0)) &&
          previousRun->part == run.part)
        region.setShareIo(true);
      previous = region;
      previousRun = &run;
    }
  }

  /// Whether any parameter of `layer` is trainable.
  bool layerTrains(int64_t layer) {
    for (auto param : getOperation().getOps<ParamOp>())
      if (param.isTrainable() && param.getLayer() == layer)
        return true;
    return false;
  }

  /// The layer an op works on, from the parameters it reads directly: -1
  /// if they belong to no layer (embedding, head), kNoParameter if it reads
  /// none.
  int64_t layerOf(Operation *op) {
    int64_t layer = kNoParameter;
    for (Value operand : op->getOperands())
      if (auto ref = operand.getDefiningOp<ParamRefOp>())
        layer = std::max(layer,
                         paramLayer.lookup_or(ref.getNameAttr().getAttr(), -1));
    return layer;
  }

  llvm::DenseMap<StringAttr, int64_t> paramLayer;

  void reject(Operation *op, StringRef reason) {
    if (remarks)
      op->emitRemark() << "not captured in a CUDA graph: '" << op->getName()
                       << "' " << reason;
  }

  /// The ops regions are made of, in order, with a null entry wherever an
  /// op that cannot be captured splits them.
  SmallVector<Operation *> capturableSequence(func::FuncOp func) {
    SmallVector<Operation *> sequence;
    for (Operation &op : func.getBody().front().without_terminator()) {
      // Stores stay in the function (they take effect when it ends), where
      // the program builder sees that an update computes in place.
      if (isClonedIntoRegions(&op) || isa<ParamStoreOp>(op))
        continue;
      StringRef reason = notCapturable(&op, captureCollectives);
      if (!reason.empty())
        reject(&op, reason);
      sequence.push_back(reason.empty() ? &op : nullptr);
    }
    return sequence;
  }

  /// Maximal runs of capturable ops.
  SmallVector<Run> stepRuns(func::FuncOp func) {
    SmallVector<Run> runs(1);
    for (Operation *op : capturableSequence(func)) {
      if (op)
        runs.back().ops.push_back(op);
      else if (!runs.back().ops.empty())
        runs.emplace_back();
    }
    if (runs.back().ops.empty())
      runs.pop_back();
    for (auto [index, run] : llvm::enumerate(runs)) {
      run.part = runs.size() > 1 ? std::to_string(index) : "step";
      run.name = (func.getName() + "." +
                  (runs.size() > 1 ? "step." + run.part : run.part))
                     .str();
    }
    return runs;
  }

  /// Runs of capturable ops on one layer; ops of no layer stay outside.
  /// In a pipeline rank's program a run also keeps to one pass of the
  /// schedule (meg.pipeline_pass, recorded by meg-pipeline-split), whose
  /// name it takes: "layers.3.forward.mb1".
  SmallVector<Run> layerRuns(func::FuncOp func) {
    SmallVector<Run> runs;
    llvm::DenseMap<int64_t, unsigned> seen;
    std::map<std::pair<int64_t, std::string>, unsigned> seenInPass;
    int64_t current = -1;
    StringAttr currentPass;
    bool pipelined = func->hasAttr(MegDialect::kPipelineRankAttrName);
    bool splitNext = true;
    for (Operation *op : capturableSequence(func)) {
      if (!op) {
        splitNext = true;
        continue;
      }
      // An op that reads no parameter goes with the op before it (in its
      // layer, and in its pass unless it records its own); one the split
      // did not make (a fusion) stays in its run's pass, and in a pipeline
      // rank's program a reshape (a view of its operand, placed next to
      // it) in both.
      bool view = pipelined && isa<ReshapeOp>(op);
      // A view starts no run: outside one, it stays outside.
      if (view && (splitNext || current < 0 || runs.empty()))
        continue;
      int64_t layer = view ? kNoParameter : layerOf(op);
      if (layer == kNoParameter)
        layer = current;
      auto pass = view ? StringAttr()
                       : op->getAttrOfType<StringAttr>(
                             MegDialect::kPipelinePassAttrName);
      if (!pass)
        pass = currentPass;
      if (layer < 0 || layer != current || pass != currentPass || splitNext) {
        current = layer;
        currentPass = pass;
        splitNext = false;
        if (layer < 0)
          continue;
        Run run;
        run.layer = layer;
        if (pass) {
          unsigned again = seenInPass[{layer, pass.str()}]++;
          run.occurrence =
              pass.getValue().starts_with("forward") ? kForward : kBackward;
          run.part = pass.str() +
                     (again ? ".part" + std::to_string(again) : std::string());
        } else {
          unsigned occurrence = seen[layer]++;
          run.occurrence = occurrence;
          run.part = occurrence < std::size(kLayerParts)
                         ? kLayerParts[occurrence]
                         : "part" + std::to_string(occurrence);
        }
        run.name = "layers." + std::to_string(layer) + "." + run.part;
        runs.push_back(std::move(run));
      }
      if (layer >= 0)
        runs.back().ops.push_back(op);
    }
    return runs;
  }

  /// Wraps `run` into a region; null if the run is empty.
  GraphRegionOp outline(Run &run) {
    if (run.ops.empty())
      return {};
    llvm::SmallPtrSet<Operation *, 32> inside(run.ops.begin(), run.ops.end());
    SmallVector<Value> inputs, results;
    SmallVector<Operation *> cloned;
    // Fusions, the only ops with regions here, are isolated from above:
    // the operands of the run's own ops are everything it reads.
    for (Operation *op : run.ops)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && inside.contains(def))
          continue;
        if (def && isClonedIntoRegions(def)) {
          if (!llvm::is_contained(cloned, def))
            cloned.push_back(def);
        } else if (!llvm::is_contained(inputs, operand)) {
          inputs.push_back(operand);
        }
      }
    for (Operation *op : run.ops)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !inside.contains(
                  run.ops.front()->getBlock()->findAncestorOpInBlock(*user));
            }))
          results.push_back(result);

    Operation *last = run.ops.back();
    OpBuilder builder(last->getContext());
    builder.setInsertionPointAfter(last);
    auto region = GraphRegionOp::create(
        builder, run.ops.front()->getLoc(), ValueRange(results).getTypes(),
        builder.getStringAttr(run.name), UnitAttr(), UnitAttr(), inputs);
    IRMapping mapping;
    beginRegionBody(region.getBody(), inputs, cloned, builder, mapping);
    for (Operation *op : run.ops)
      builder.clone(*op, mapping);
    SmallVector<Value> yielded;
    for (Value result : results)
      yielded.push_back(mapping.lookup(result));
    YieldOp::create(builder, region.getLoc(), yielded);
    for (auto [result, replacement] : llvm::zip(results, region.getResults()))
      result.replaceAllUsesWith(replacement);
    for (Operation *op : llvm::reverse(run.ops))
      op->erase();
    return region;
  }
};

} // namespace
