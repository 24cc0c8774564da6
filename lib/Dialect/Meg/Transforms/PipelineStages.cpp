//===- PipelineStages.cpp - the meg-pipeline-stages pass -----------------===//
//
// Cuts a model into pipeline stages at its recorded layers (`meg.layer`):
// P x V stages over the pipeline group of the module's `meg.pipeline` (P
// ranks, V virtual stages each), the layers before the first stage's end on
// stage 0 with the embedding, the final norm, the LM head and the loss on
// the last. The cut is the user's (`layers`, per stage) or balanced: each
// layer's cost is the work of its ops in the loss function (matrix
// products and attention by their flops, other ops by the elements they
// write), the embedding's and the head's counted on the first and last
// stages, and the contiguous split that minimises the largest stage's cost
// is taken. The decision is recorded: the module's `meg.pipeline` gets the
// layers of every stage, and each parameter the stages that hold it
// (`meg.stages`; a tied embedding both the first and the last).
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/Transforms/Passes.h"

#include "GroupRewrites.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

#include <limits>
#include <map>
#include <set>

namespace mlir::meg {
#define GEN_PASS_DEF_MEGPIPELINESTAGES
#include "megc/Dialect/Meg/Transforms/Passes.h.inc"
} // namespace mlir::meg

using namespace mlir;
using namespace mlir::meg;

namespace {

int64_t elements(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

/// The work of one op: multiply-adds twice for matrix products and
/// attention (half the scores under a causal mask), nothing for references,
/// constants and reshapes, the elements written for everything else.
double costOf(Operation *op) {
  if (isa<ParamRefOp, ReshapeOp>(op) || op->hasTrait<OpTrait::ConstantLike>())
    return 0;
  if (auto linear = dyn_cast<LinearOp>(op)) {
    auto weight = cast<RankedTensorType>(linear.getWeight().getType());
    return 2.0 * static_cast<double>(elements(linear.getResult())) *
           static_cast<double>(weight.getDimSize(1));
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    auto q = cast<RankedTensorType>(attention.getQuery().getType());
    auto k = cast<RankedTensorType>(attention.getKey().getType());
    auto v = cast<RankedTensorType>(attention.getValue().getType());
    double pairs = static_cast<double>(q.getDimSize(0)) * q.getDimSize(2) *
                   q.getDimSize(1) * k.getDimSize(1);
    if (attention.getCausal())
      pairs /= 2;
    return 2.0 * pairs * (q.getDimSize(3) + v.getDimSize(3));
  }
  double written = 0;
  for (Value result : op->getResults())
    written += static_cast<double>(elements(result));
  return written;
}

std::optional<int64_t> layerOf(Operation *op) {
  if (auto layer = op->getAttrOfType<IntegerAttr>(MegDialect::kLayerAttrName))
    return layer.getInt();
  return std::nullopt;
}

/// The contiguous split of `costs` into `parts` non-empty runs whose
/// largest sum is the least (ties: the earlier cut), as run lengths;
/// `first` and `last` are added to the first and last runs.
SmallVector<int64_t> balance(ArrayRef<double> costs, int64_t parts,
                             double first, double last) {
  int64_t n = costs.size();
  SmallVector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  auto runCost = [&](int64_t begin, int64_t end, int64_t part) {
    double cost = prefix[end] - prefix[begin];
    if (part == 0)
      cost += first;
    if (part == parts - 1)
      cost += last;
    return cost;
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[p][e]: the least largest cost of layers [0, e) in runs 0..p.
  std::vector<std::vector<double>> best(parts,
                                        std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int64_t>> cut(parts, std::vector<int64_t>(n + 1, 0));
  for (int64_t e = 1; e <= n; ++e)
    best[0][e] = runCost(0, e, 0);
  for (int64_t p = 1; p < parts; ++p)
    for (int64_t e = p + 1; e <= n; ++e)
      for (int64_t b = p; b < e; ++b) {
        double cost = std::max(best[p - 1][b], runCost(b, e, p));
        if (cost < best[p][e]) {
          best[p][e] = cost;
          cut[p][e] = b;
        }
      }
  SmallVector<int64_t> lengths(parts);
  int64_t end = n;
  for (int64_t p = parts - 1; p > 0; --p) {
    int64_t begin = cut[p][end];
    lengths[p] = end - begin;
    end = begin;
  }
  lengths[0] = end;
  return lengths;
}

struct MegPipelineStagesPass
    : public mlir::meg::impl::MegPipelineStagesBase<MegPipelineStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto config =
        module->getAttrOfType<PipelineAttr>(MegDialect::kPipelineAttrName);
    if (!config)
      return;
    auto fail = [&](const Twine &message) {
      module.emitError() << "meg-pipeline-stages: " << message;
      signalPassFailure();
    };
    auto mesh = module.lookupSymbol<MeshOp>(config.getMesh().getAttr());
    if (!mesh)
      return fail("mesh " + config.getMesh().getValue() + " is not a meg.mesh");
    int64_t ranks = groupRanks(mesh, config.getAxes());
    int64_t stages = ranks * config.getVirtualStages();

    // The layers, from the parameters that record one.
    int64_t numLayers = 0;
    for (ParamOp param : module.getOps<ParamOp>())
      if (std::optional<int64_t> layer = layerOf(param))
        numLayers = std::max(numLayers, *layer + 1);
    if (numLayers == 0)
      return fail("the model records no layers (meg.layer on its "
                  "parameters): pipeline stages are cut at layers");
    if (stages > numLayers)
      return fail(
          Twine(ranks) + " ranks x " + Twine(config.getVirtualStages()) +
          " virtual stages = " + Twine(stages) + " stages, but the model has " +
          Twine(numLayers) + " layers (a stage holds one at least)");

    SmallVector<int64_t> lengths;
    if (config.getLayers())
      llvm::append_range(lengths, config.getLayers().asArrayRef());
    if (!lengths.empty()) {
      if (static_cast<int64_t>(lengths.size()) != stages)
        return fail("layers gives " + Twine(lengths.size()) +
                    " stages, the pipeline has " + Twine(stages));
      int64_t sum = 0;
      for (auto [stage, count] : llvm::enumerate(lengths)) {
        if (count < 1)
          return fail("stage " + Twine(stage) + " is given " + Twine(count) +
                      " layers; every stage holds one at least");
        sum += count;
      }
      if (sum != numLayers)
        return fail("layers sums to " + Twine(sum) + ", but the model has " +
                    Twine(numLayers) + " layers");
    } else {
      // Costs from the loss function (the forward), or the forward.
      auto func = module.lookupSymbol<func::FuncOp>("loss");
      if (!func)
        func = module.lookupSymbol<func::FuncOp>("forward");
      SmallVector<double> costs(numLayers, 0.0);
      double before = 0, after = 0;
      bool seenLayer = false;
      if (func)
        func.walk([&](Operation *op) {
          if (op == func.getOperation())
            return;
          if (std::optional<int64_t> layer = layerOf(op)) {
            if (*layer >= 0 && *layer < numLayers)
              costs[*layer] += costOf(op);
            seenLayer = true;
          } else if (seenLayer) {
            after += costOf(op);
          } else {
            before += costOf(op);
          }
        });
      // Everything between the layers, too (an unlayered op after a
      // layer), counts on the last stage: the head.
      lengths = balance(costs, stages, before, after);
      for (auto [stage, count] : llvm::enumerate(lengths)) {
        double cost = 0;
        int64_t first = 0;
        for (int64_t s = 0; s < static_cast<int64_t>(stage); ++s)
          first += lengths[s];
        for (int64_t l = first; l < first + count; ++l)
          cost += costs[l];
        if (stage == 0)
          cost += before;
        if (static_cast<int64_t>(stage) == stages - 1)
          cost += after;
        mesh.emitRemark() << "meg-pipeline-stages: stage " << stage
                          << ": layers " << first << ".." << first + count - 1
                          << ", cost " << static_cast<int64_t>(cost);
      }
    }

    // Each layer's stage, and the parameters'.
    SmallVector<int64_t> stageOfLayer;
    for (auto [stage, count] : llvm::enumerate(lengths))
      stageOfLayer.append(count, stage);
    OpBuilder builder(module.getContext());
    // Uses before the first layered op go with stage 0, after it with the
    // last stage.
    std::map<std::string, std::set<int64_t>> held;
    for (auto func : module.getOps<func::FuncOp>()) {
      bool seenLayer = false;
      func.walk([&](Operation *op) {
        if (op == func.getOperation())
          return;
        std::optional<int64_t> layer = layerOf(op);
        if (layer)
          seenLayer = true;
        auto ref = dyn_cast<ParamRefOp>(op);
        if (!ref)
          return;
        int64_t stage = layer && *layer < numLayers ? stageOfLayer[*layer]
                        : seenLayer                 ? stages - 1
                                                    : 0;
        held[ref.getName().str()].insert(stage);
      });
    }
    // Each op of the model's functions records its stage (meg.stage): a
    // layer's op its layer's, another the latest stage of the values it
    // reads (the head reads the last layer's output); an op that reads
    // none (constants, an unlayered parameter, the inputs) records none:
    // every stage that needs it computes it.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      DenseMap<Value, int64_t> stageOf;
      for (Operation &op : func.getBody().front().without_terminator()) {
        std::optional<int64_t> stage;
        if (std::optional<int64_t> layer = layerOf(&op);
            layer && *layer < numLayers)
          stage = stageOfLayer[*layer];
        else
          for (Value operand : op.getOperands())
            if (auto it = stageOf.find(operand); it != stageOf.end())
              stage = std::max(stage.value_or(0), it->second);
        if (!stage)
          continue;
        op.setAttr(MegDialect::kStageAttrName,
                   builder.getI64IntegerAttr(*stage));
        for (Value result : op.getResults())
          stageOf[result] = *stage;
      }
    }
    for (ParamOp param : module.getOps<ParamOp>()) {
      std::set<int64_t> stagesOf;
      if (std::optional<int64_t> layer = layerOf(param))
        stagesOf.insert(stageOfLayer[*layer]);
      auto it = held.find(param.getSymName().str());
      if (it != held.end() && !layerOf(param))
        stagesOf = it->second;
      if (stagesOf.empty())
        stagesOf.insert(0);
      param->setAttr(MegDialect::kStagesAttrName,
                     builder.getDenseI64ArrayAttr(SmallVector<int64_t>(
                         stagesOf.begin(), stagesOf.end())));
    }
    module->setAttr(MegDialect::kPipelineAttrName,
                    PipelineAttr::get(module.getContext(), config.getMesh(),
                                      config.getAxes(),
                                      config.getVirtualStages(),
                                      builder.getDenseI64ArrayAttr(lengths),
                                      config.getSchedule()));
  }
};

} // namespace
