//===- MegDialect.cpp - The meg dialect --------------------------------===//
//
// Registers the dialect's ops, attributes and types and verifies the module
// attributes it owns (precision policy, optimizer, FSDP configuration).
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Dialect/Meg/IR/PipelinePass.h"

#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include "megc/Dialect/Meg/IR/MegDialect.cpp.inc"

using namespace mlir;
using namespace mlir::meg;

namespace {
/// Every meg op may be inlined: none depends on its enclosing function
/// (parameters and meshes are module symbols).
struct MegInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void MegDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "megc/Dialect/Meg/IR/MegOps.cpp.inc"
      >();
  registerAttributes();
  registerTypes();
  addInterfaces<MegInlinerInterface>();
}

/// Checks that `axes` names distinct axes of the mesh `meshRef` found from
/// `module`.
static LogicalResult verifyMeshAxes(Operation *module, StringRef attrName,
                                    FlatSymbolRefAttr meshRef, ArrayAttr axes,
                                    StringRef what) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(module, meshRef);
  if (!mesh)
    return module->emitError() << "'" << attrName << "' refers to mesh "
                               << meshRef << ", which is not a meg.mesh";
  llvm::StringSet<> seen;
  for (Attribute axis : axes) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (!mesh.getAxisSize(name))
      return module->emitError()
             << "'" << attrName << "' " << what << " axis '" << name
             << "' is not an axis of mesh " << meshRef;
    if (!seen.insert(name).second)
      return module->emitError() << "'" << attrName << "' " << what << " axis '"
                                 << name << "' appears twice";
  }
  return success();
}

LogicalResult MegDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto expectModule = [&]() -> LogicalResult {
    if (isa<ModuleOp>(op))
      return success();
    return op->emitError() << "'" << name
                           << "' is only valid on a builtin.module";
  };
  if (name == kPrecisionAttrName) {
    if (!isa<PrecisionAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' expects a #meg.precision attribute";
    return expectModule();
  }
  if (name == kOptimizerAttrName) {
    if (!isa<AdamWAttr>(attr.getValue()))
      return op->emitError() << "'" << name
                             << "' expects an optimizer attribute such as "
                                "#meg.adamw";
    return expectModule();
  }
  if (name == kFsdpAttrName) {
    auto fsdp = dyn_cast<FsdpAttr>(attr.getValue());
    if (!fsdp)
      return op->emitError()
             << "'" << name << "' expects a #meg.fsdp attribute";
    if (failed(expectModule()) ||
        failed(
            verifyMeshAxes(op, name, fsdp.getMesh(), fsdp.getShard(), "shard")))
      return failure();
    if (fsdp.getOuter() && failed(verifyMeshAxes(op, name, fsdp.getMesh(),
                                                 fsdp.getOuter(), "outer")))
      return failure();
    return success();
  }
  if (name == kTensorParallelAttrName) {
    auto tp = dyn_cast<TensorParallelAttr>(attr.getValue());
    if (!tp)
      return op->emitError()
             << "'" << name << "' expects a #meg.tensor_parallel attribute";
    if (failed(expectModule()))
      return failure();
    return verifyMeshAxes(op, name, tp.getMesh(), tp.getAxes(),
                          "tensor_parallel");
  }
  if (name == kPipelineAttrName) {
    auto pp = dyn_cast<PipelineAttr>(attr.getValue());
    if (!pp)
      return op->emitError()
             << "'" << name << "' expects a #meg.pipeline attribute";
    if (failed(expectModule()))
      return failure();
    return verifyMeshAxes(op, name, pp.getMesh(), pp.getAxes(), "pipeline");
  }
  if (name == kStagesAttrName) {
    auto stages = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!isa<ParamOp>(op) || !stages || stages.empty() ||
        llvm::any_of(stages.asArrayRef(), [](int64_t s) { return s < 0; }))
      return op->emitError() << "'" << name
                             << "' expects a non-empty array<i64> of "
                                "pipeline stages on a meg.param";
    return success();
  }
  if (name == kContextParallelAttrName) {
    auto cp = dyn_cast<ContextParallelAttr>(attr.getValue());
    if (!cp)
      return op->emitError()
             << "'" << name << "' expects a #meg.context_parallel attribute";
    if (failed(expectModule()))
      return failure();
    return verifyMeshAxes(op, name, cp.getMesh(), cp.getAxes(),
                          "context_parallel");
  }
  if (name == kTpLayerAttrName) {
    auto layer = dyn_cast<TpLayerAttr>(attr.getValue());
    if (!layer)
      return op->emitError()
             << "'" << name << "' expects a #meg.tp_layer attribute";
    bool vocab = layer.getKind() == TpLayerKind::vocab;
    if (vocab ? !isa<EmbeddingOp>(op) : !isa<LinearOp>(op))
      return op->emitError()
             << "'" << name << "' " << stringifyTpLayerKind(layer.getKind())
             << " applies to a " << (vocab ? "meg.embedding" : "meg.linear");
    return success();
  }
  if (name == kMicroBatchesAttrName) {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (!count || count.getInt() < 1)
      return op->emitError() << "'" << name
                             << "' expects an integer number of "
                                "micro-batches >= 1";
    return expectModule();
  }
  if (name == kLrScheduleAttrName) {
    auto schedule = dyn_cast<LrScheduleAttr>(attr.getValue());
    if (!schedule)
      return op->emitError()
             << "'" << name << "' expects a #meg.lr_schedule attribute";
    if (failed(expectModule()))
      return failure();
    auto adamw = op->getAttrOfType<AdamWAttr>(kOptimizerAttrName);
    if (!adamw)
      return op->emitError() << "'" << name << "' needs '"
                             << kOptimizerAttrName << "'";
    if (schedule.getMinLr().convertToDouble() >
            adamw.getLr().convertToDouble() ||
        schedule.getInitLr().convertToDouble() >
            adamw.getLr().convertToDouble())
      return op->emitError() << "'" << name
                             << "': min_lr and init_lr must not exceed the "
                                "optimizer's lr "
                             << adamw.getLr().convertToDouble();
    return success();
  }
  if (name == kHfConfigAttrName) {
    auto text = dyn_cast<StringAttr>(attr.getValue());
    if (!text)
      return op->emitError() << "'" << name
                             << "' expects a string holding a JSON object";
    llvm::Expected<llvm::json::Value> config = llvm::json::parse(text);
    if (!config)
      return op->emitError() << "'" << name << "' is not valid JSON: "
                             << llvm::toString(config.takeError());
    if (!config->getAsObject())
      return op->emitError() << "'" << name << "' must be a JSON object";
    return expectModule();
  }
  if (name == kTargetAttrName) {
    if (!isa<TargetAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' expects a #meg.target attribute";
    return expectModule();
  }
  if (name == kKernelStrategyAttrName) {
    if (!isa<KernelStrategyAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' expects a #meg.kernel_strategy attribute";
    if (!isa<func::FuncOp>(op))
      return op->emitError()
             << "'" << name << "' is only valid on a kernel function";
    return success();
  }
  if (name == kNonNegativeAttrName) {
    auto param = dyn_cast<ParamOp>(op);
    if (!param || !isa<UnitAttr>(attr.getValue()) || !param.getState())
      return op->emitError() << "'" << name
                             << "' is a unit attribute of state meg.params";
    return success();
  }
  if (name == kInPlaceAttrName) {
    auto func = dyn_cast<func::FuncOp>(op);
    auto inPlace = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!func || !inPlace)
      return op->emitError() << "'" << name
                             << "' expects an array of argument indices on a "
                                "kernel function";
    for (int64_t arg : inPlace.asArrayRef())
      if (arg < -1 || arg >= static_cast<int64_t>(func.getNumArguments()))
        return op->emitError()
               << "'" << name << "' names argument " << arg << " of a "
               << "function with " << func.getNumArguments() << " arguments";
    return success();
  }
  if (name == kStageAttrName || name == kMicroBatchAttrName ||
      name == kPipelineRankAttrName || name == kPipelineOwnerAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!index || index.getInt() < 0)
      return op->emitError()
             << "'" << name << "' expects a non-negative integer";
    if (name == kPipelineRankAttrName && !isa<func::FuncOp>(op))
      return op->emitError() << "'" << name << "' is only valid on a function";
    return success();
  }
  if (name == kBackwardAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' is a unit attribute";
    return success();
  }
  if (name == kPipelinePassAttrName) {
    auto pass = dyn_cast<StringAttr>(attr.getValue());
    if (!pass || !parsePipelinePass(pass.getValue()))
      return op->emitError()
             << "'" << name
             << "' expects a pass of a pipeline schedule: \"forward.mbI\", "
                "\"backward.mbI\" or \"weight.mbI\"";
    return success();
  }
  if (name == kEntryNameAttrName) {
    auto entry = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !entry || entry.getValue().empty())
      return op->emitError()
             << "'" << name << "' expects a non-empty string on a function";
    return success();
  }
  if (name == kLayerAttrName || name == kLossChunkAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!index || index.getInt() < 0)
      return op->emitError()
             << "'" << name << "' expects a non-negative integer (the "
             << (name == kLayerAttrName ? "layer" : "chunk") << ")";
    return success();
  }
  if (name == kStateOfAttrName) {
    if (!isa<ParamOp>(op) || !isa<StateOfAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' expects a #meg.state_of on a meg.param";
    return success();
  }
  if (name == kRecomputedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' is a unit attribute";
    return success();
  }
  if (name == kRematStepsAttrName) {
    auto steps = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!steps || steps.size() != 2 || steps[0] < 0 || steps[0] > steps[1])
      return op->emitError() << "'" << name
                             << "' expects [taken, ladder] with 0 <= taken "
                                "<= ladder";
    return success();
  }
  if (name == kOnlineSoftmaxAttrName) {
    auto nest = dyn_cast<DestinationStyleOpInterface>(op);
    if (!isa<UnitAttr>(attr.getValue()) || !nest ||
        op->getName().getStringRef() != "linalg.generic" ||
        nest.getNumDpsInits() != 2)
      return op->emitError() << "'" << name
                             << "' is a unit attribute of a linalg.generic "
                                "reducing into two outputs (a maximum and a "
                                "sum of exponentials)";
    return success();
  }
  return op->emitError() << "unknown meg attribute '" << name << "'";
}

/// Checks a `meg.name` on a function argument or result.
static LogicalResult verifyValueName(Operation *op, NamedAttribute attr,
                                     StringRef where) {
  if (attr.getName().getValue() != MegDialect::kNameAttrName)
    return op->emitError() << "unknown meg attribute '"
                           << attr.getName().getValue() << "' on " << where;
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError() << "'" << MegDialect::kNameAttrName << "' on "
                           << where << " expects a non-empty string";
  return success();
}

/// An entry's inputs (or outputs) are looked up by name: a name used by an
/// earlier argument (result) of the same function is an error.
static LogicalResult verifyUniqueName(Operation *op, unsigned index,
                                      bool result, NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!func || !name)
    return success();
  for (unsigned i = 0; i < index; ++i) {
    auto other = result ? func.getResultAttrOfType<StringAttr>(
                              i, MegDialect::kNameAttrName)
                        : func.getArgAttrOfType<StringAttr>(
                              i, MegDialect::kNameAttrName);
    if (other == name)
      return op->emitError()
             << (result ? "result " : "argument ") << index << " is named '"
             << name.getValue() << "' like " << (result ? "result " : "argument ")
             << i << "; the names of an entry's "
             << (result ? "outputs" : "inputs") << " must differ";
  }
  return success();
}

LogicalResult MegDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  if (failed(verifyValueName(op, attr, "argument " + std::to_string(argIndex))))
    return failure();
  return verifyUniqueName(op, argIndex, /*result=*/false, attr);
}

LogicalResult MegDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  if (attr.getName() == kGradOfAttrName) {
    auto param = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
    auto module = op->getParentOfType<ModuleOp>();
    auto target =
        param && module ? module.lookupSymbol<ParamOp>(param) : ParamOp();
    if (!target || !target.isTrainable())
      return op->emitError()
             << "'" << kGradOfAttrName << "' on result " << resultIndex
             << " expects a trainable meg.param, not " << attr.getValue();
    return success();
  }
  if (failed(verifyValueName(op, attr, "result " + std::to_string(resultIndex))))
    return failure();
  return verifyUniqueName(op, resultIndex, /*result=*/true, attr);
}
