//===- BuildProgram.cpp - entry functions to commands and kernels ------===//
//
// Walks each public function in order and places every op: parameter reads
// and inputs become buffers, reshapes become views, library calls the
// runtime's commands (LibraryCalls.cpp) and every other op a kernel
// (PlaceKernels.cpp). Returned values are copied to the outputs. The jobs
// are listed in ProgramBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

#include "megc/Dialect/Meg/IR/PipelinePass.h"

namespace megc {

uint64_t BufferDesc::sizeBytes() const {
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return static_cast<uint64_t>(type.getNumElements()) * (bits / 8);
}

uint64_t ProgramDesc::stateBytes(int32_t pipelineRank) const {
  uint64_t total = 0;
  for (const ParameterDesc &param : parameters)
    if (param.pipelineOwner < 0 || pipelineRank < 0 ||
        param.pipelineOwner == pipelineRank)
      total += static_cast<uint64_t>(param.type.getNumElements()) *
               (param.type.getElementType().getIntOrFloatBitWidth() / 8);
  return total;
}

namespace {

/// The name an entry argument or result carries (`meg.name`), or a
/// positional default.
std::string valueName(func::FuncOp func, bool result, unsigned index) {
  StringAttr name =
      result
          ? func.getResultAttrOfType<StringAttr>(index,
                                                 MegDialect::kNameAttrName)
          : func.getArgAttrOfType<StringAttr>(index, MegDialect::kNameAttrName);
  if (name)
    return name.str();
  return (result ? "result" : "arg") + std::to_string(index);
}

} // namespace

FailureOr<ProgramDesc> ProgramBuilder::build() {
  program.kernelModule = ModuleOp::create(module.getLoc());
  if (auto config =
          module->getAttrOfType<StringAttr>(MegDialect::kHfConfigAttrName))
    program.hfConfig = config.str();
  program.memoryBudget = options.memoryBudget;
  if (failed(describeMesh()))
    return failure();
  if (failed(describeParameters()))
    return failure();
  if (failed(describeLrSchedule()))
    return failure();
  describePipeline();
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isPrivate() || func.isExternal())
      continue;
    if (failed(buildEntry(func)))
      return failure();
  }
  if (program.entries.empty())
    return module.emitError()
           << "has no public function to compile as an entry point";
  return std::move(program);
}

uint32_t ProgramBuilder::addBuffer(BufferKind kind, uint32_t index,
                                   RankedTensorType type, int32_t aliasOf) {
  BufferDesc buffer;
  buffer.kind = kind;
  buffer.index = index;
  buffer.type = type;
  buffer.aliasOf = aliasOf;
  entry->buffers.push_back(buffer);
  return entry->buffers.size() - 1;
}

LogicalResult ProgramBuilder::buildEntry(func::FuncOp func) {
  // Identities for autodiff: copy_to_group (still there without autodiff,
  // in an inference build) and stop_gradient; a result is its input's
  // buffer.
  func.walk([](Operation *op) {
    if (!isa<CopyToGroupOp, StopGradientOp>(op))
      return;
    op->getResult(0).replaceAllUsesWith(op->getOperand(0));
    op->erase();
  });
  program.entries.emplace_back();
  entry = &program.entries.back();
  entry->name = func.getName().str();
  // One rank's program of a pipeline's entry (meg-pipeline-split).
  if (auto rank =
          func->getAttrOfType<IntegerAttr>(MegDialect::kPipelineRankAttrName)) {
    auto name = func->getAttrOfType<StringAttr>(MegDialect::kEntryNameAttrName);
    auto pipeline =
        module->getAttrOfType<PipelineAttr>(MegDialect::kPipelineAttrName);
    if (!name || !pipeline)
      return func.emitError()
             << "a pipeline rank's program needs its entry's name and the "
                "module's meg.pipeline";
    FailureOr<uint32_t> group =
        submeshIndex(func, pipeline.getMesh(), pipeline.getAxes());
    if (failed(group))
      return failure();
    entry->name = name.getValue().str();
    entry->stageSubmesh = static_cast<int32_t>(*group);
    entry->pipelineRank = static_cast<int32_t>(rank.getInt());
  }
  buffers.clear();
  for (auto [index, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return func.emitError()
             << "entry argument " << index << " must be a ranked tensor, got "
             << arg.getType();
    entry->inputs.push_back({valueName(func, false, index), type, inputSplit});
    if (isa<IntegerType>(type.getElementType()))
      indexBoundOf(arg, entry->inputs.back());
    buffers[arg] = addBuffer(BufferKind::Input, index, type);
  }
  for (Operation &op : func.getBody().front())
    if (failed(placeOp(&op)))
      return failure();
  return success();
}

FailureOr<uint32_t> ProgramBuilder::bufferFor(Value value) {
  auto it = buffers.find(value);
  if (it != buffers.end())
    return it->second;
  // A constant read by a command other than a kernel gets a kernel that
  // writes it.
  if (Operation *def = value.getDefiningOp()) {
    if (def->hasTrait<OpTrait::ConstantLike>()) {
      if (failed(placeKernel(def)))
        return failure();
      return buffers.lookup(value);
    }
  }
  return emitError(value.getLoc()) << "value has no buffer";
}

LogicalResult ProgramBuilder::placeOp(Operation *op) {
  size_t first = entry->commands.size();
  LogicalResult placed = placeOpCommands(op);
  // The commands of a recomputation, for the entry's recompute_flops.
  entry->recomputed.resize(entry->commands.size(), false);
  if (op->hasAttr(MegDialect::kRecomputedAttrName))
    std::fill(entry->recomputed.begin() + first, entry->recomputed.end(), true);
  // The pipeline pass of its commands, which `megc plan` times.
  using PassKind = EntryDesc::PassKind;
  entry->passKind.resize(entry->commands.size(), PassKind::None);
  if (std::optional<PipelinePass> pass = pipelinePassOf(op))
    std::fill(entry->passKind.begin() + first, entry->passKind.end(),
              pass->kind == PipelinePass::Forward    ? PassKind::Forward
              : pass->kind == PipelinePass::Backward ? PassKind::Backward
                                                     : PassKind::Weight);
  return placed;
}

LogicalResult ProgramBuilder::placeOpCommands(Operation *op) {
  if (absorbed.contains(op))
    return success();
  if (op->hasTrait<OpTrait::ConstantLike>())
    return success(); // cloned into the kernels that read it
  if (auto ref = dyn_cast<ParamRefOp>(op)) {
    buffers[ref.getResult()] =
        addBuffer(BufferKind::Parameter, paramIndex.lookup(ref.getName()),
                  cast<RankedTensorType>(ref.getType()));
    return success();
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    FailureOr<uint32_t> source = bufferFor(reshape.getInput());
    if (failed(source))
      return failure();
    const BufferDesc &from = entry->buffers[*source];
    int32_t root = from.aliasOf >= 0 ? from.aliasOf : *source;
    buffers[reshape.getResult()] = addBuffer(
        from.kind, from.index, cast<RankedTensorType>(reshape.getType()), root);
    return success();
  }
  if (auto store = dyn_cast<ParamStoreOp>(op)) {
    // Stores come after every read of the entry (meg-optimizer puts them
    // last), so a copy into the parameter's storage is the update.
    FailureOr<uint32_t> source = bufferFor(store.getValue());
    if (failed(source))
      return failure();
    uint32_t index = paramIndex.lookup(store.getName());
    auto type = cast<RankedTensorType>(store.getValue().getType());
    // Computed in the parameter's storage already (an update in place).
    const BufferDesc &from = entry->buffers[*source];
    if (from.kind == BufferKind::Parameter && from.index == index &&
        from.offset == 0 && from.type == type)
      return success();
    uint32_t param = addBuffer(BufferKind::Parameter, index, type);
    entry->commands.push_back(
        CopyCommand{*source, param, entry->buffers[param].sizeBytes()});
    return success();
  }
  if (auto linear = dyn_cast<LinearOp>(op))
    return placeLinear(linear);
  if (isa<AttentionOp, AttentionGradOp>(op))
    return placeAttention(op);
  if (std::optional<LogicalResult> placed = placeLibraryCall(op))
    return *placed;
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return placeMatmul(matmul);
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    auto func = cast<func::FuncOp>(op->getParentOp());
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type)
        return ret.emitError()
               << "entry result " << index << " must be a ranked tensor";
      FailureOr<uint32_t> source = bufferFor(value);
      if (failed(source))
        return failure();
      entry->outputs.push_back({valueName(func, true, index), type});
      // Computed into the output already (resultBuffer).
      const BufferDesc &from = entry->buffers[*source];
      if (from.kind == BufferKind::Output && from.aliasOf < 0 &&
          from.index == index)
        continue;
      uint32_t output = addBuffer(BufferKind::Output, index, type);
      entry->commands.push_back(
          CopyCommand{*source, output, entry->buffers[output].sizeBytes()});
    }
    return success();
  }
  if (isa<func::CallOp>(op))
    return op->emitError() << "calls must be inlined before building the "
                              "program";
  if (isa<FusionOp>(op))
    return placeKernel(op);
  if (auto region = dyn_cast<GraphRegionOp>(op))
    return placeGraphRegion(region);
  if (isa<CollectiveOpInterface, WaitOp>(op))
    return placeCollective(op);
  if (op->getNumRegions() != 0)
    return op->emitError() << "'" << op->getName()
                           << "' is not supported by the program lowering yet";
  return placeKernel(op);
}

/// The region's ops are placed like the function's, on the same buffers;
/// the commands they produce form the graph.
LogicalResult ProgramBuilder::placeGraphRegion(GraphRegionOp region) {
  Block &body = region.getBody().front();
  for (auto [input, arg] : llvm::zip(region.getInputs(), body.getArguments())) {
    FailureOr<uint32_t> buffer = bufferFor(input);
    if (failed(buffer))
      return failure();
    buffers[arg] = *buffer;
  }
  GraphRegionDesc graph;
  graph.name = region.getName().str();
  graph.first = entry->commands.size();
  graph.shareIo = region.getShareIo();
  graph.forwardOnly = region.getForwardOnly();
  for (Operation &inner : body.without_terminator())
    if (failed(placeOp(&inner)))
      return failure();
  for (auto [result, yielded] :
       llvm::zip(region.getResults(), body.getTerminator()->getOperands())) {
    FailureOr<uint32_t> buffer = bufferFor(yielded);
    if (failed(buffer))
      return failure();
    buffers[result] = *buffer;
  }
  graph.count = entry->commands.size() - graph.first;
  if (graph.count > 0)
    entry->graphs.push_back(std::move(graph));
  return success();
}

FailureOr<ProgramDesc> buildProgram(ModuleOp module,
                                    const CompileOptions &options) {
  return ProgramBuilder(module, options).build();
}

} // namespace megc
