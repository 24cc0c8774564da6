//===- ProgramDescription.cpp - parameters, mesh and schedule ---===//
//
// What the program says about itself besides its entries: every parameter
// (init, aliases, parts, sharding), the mesh and its registered submeshes,
// the split of entry inputs under FSDP and the learning-rate schedule.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

namespace megc {

void ProgramBuilder::describePipeline() {
  auto config =
      module->getAttrOfType<PipelineAttr>(MegDialect::kPipelineAttrName);
  if (!config)
    return;
  ProgramDesc::Pipeline pipeline;
  int32_t ranks = 0;
  for (auto func : module.getOps<func::FuncOp>())
    if (auto rank =
            func->getAttrOfType<IntegerAttr>(MegDialect::kPipelineRankAttrName))
      ranks = std::max(ranks, static_cast<int32_t>(rank.getInt()) + 1);
  pipeline.ranks = std::max(ranks, 1);
  pipeline.chunks = static_cast<int32_t>(config.getVirtualStages());
  if (auto micro =
          module->getAttrOfType<IntegerAttr>(MegDialect::kMicroBatchesAttrName))
    pipeline.microBatches = static_cast<int32_t>(micro.getInt());
  pipeline.schedule = config.getSchedule()
                          ? config.getSchedule().str()
                          : (pipeline.chunks > 1 ? "interleaved" : "1f1b");
  program.pipeline = pipeline;
}

LogicalResult ProgramBuilder::describeParameters() {
  for (ParamOp param : module.getOps<ParamOp>()) {
    paramIndex[param.getSymName()] = program.parameters.size();
    InitAttr init = param.getInit();
    program.parameters.push_back(
        {param.getSymName().str(), param.getTensorType(), param.isTrainable(),
         stringifyInitKind(init.getKind()).str(),
         init.getScale().convertToDouble(), param.getState(),
         init.getSource() ? init.getSource().getValue().str() : ""});
    program.parameters.back().nonNegative =
        param->hasAttr(MegDialect::kNonNegativeAttrName);
    if (ArrayAttr aliases = param.getAliasesAttr())
      for (Attribute alias : aliases)
        program.parameters.back().aliases.push_back(
            cast<StringAttr>(alias).str());
    if (ArrayAttr parts = param.getPartsAttr())
      for (Attribute part : parts)
        program.parameters.back().parts.push_back(cast<StringAttr>(part).str());
    if (auto owner = param->getAttrOfType<IntegerAttr>(
            MegDialect::kPipelineOwnerAttrName)) {
      auto pipeline =
          module->getAttrOfType<PipelineAttr>(MegDialect::kPipelineAttrName);
      if (!pipeline)
        return param.emitError() << "has a pipeline owner, but the module "
                                    "has no meg.pipeline";
      FailureOr<uint32_t> group =
          submeshIndex(param, pipeline.getMesh(), pipeline.getAxes());
      if (failed(group))
        return failure();
      program.parameters.back().pipelineSubmesh = *group;
      program.parameters.back().pipelineOwner =
          static_cast<int32_t>(owner.getInt());
    }
    if (ShardingAttr sharding = param.getShardingAttr()) {
      FailureOr<uint32_t> group =
          submeshIndex(param, sharding.getMesh(), sharding.getAxes());
      if (failed(group))
        return failure();
      program.parameters.back().shardSubmesh = *group;
      program.parameters.back().fullShape.assign(sharding.getShape().begin(),
                                                 sharding.getShape().end());
      program.parameters.back().shardDim = sharding.getDim();
      if (ArrayAttr blockAxes = sharding.getBlockAxes()) {
        FailureOr<uint32_t> blocks =
            submeshIndex(param, sharding.getMesh(), blockAxes);
        if (failed(blocks))
          return failure();
        program.parameters.back().blockSubmesh = *blocks;
      }
    }
  }
  return success();
}

LogicalResult ProgramBuilder::describeLrSchedule() {
  auto schedule =
      module->getAttrOfType<LrScheduleAttr>(MegDialect::kLrScheduleAttrName);
  if (!schedule || !schedule.getLrParam())
    return success();
  auto adamw = module->getAttrOfType<AdamWAttr>(MegDialect::kOptimizerAttrName);
  auto lr = paramIndex.find(schedule.getLrParam().getValue());
  auto step = paramIndex.find(
      schedule.getStepParam() ? schedule.getStepParam().getValue() : "");
  if (!adamw || lr == paramIndex.end() || step == paramIndex.end())
    return module.emitError()
           << "'" << MegDialect::kLrScheduleAttrName
           << "' names lr and step parameters that are not declared";
  program.lrSchedule =
      LrScheduleDesc{static_cast<uint32_t>(schedule.getKind()),
                     adamw.getLr().convertToDouble(),
                     schedule.getMinLr().convertToDouble(),
                     schedule.getInitLr().convertToDouble(),
                     schedule.getWarmup(),
                     schedule.getDecay(),
                     schedule.getWsdDecay(),
                     static_cast<uint32_t>(schedule.getWsdStyle()),
                     static_cast<uint32_t>(lr->second),
                     static_cast<uint32_t>(step->second)};
  return success();
}

LogicalResult ProgramBuilder::describeMesh() {
  auto meshes = llvm::to_vector(module.getOps<MeshOp>());
  if (meshes.empty())
    return success();
  if (meshes.size() > 1)
    return meshes[1].emitError()
           << "a program runs on one mesh; this module declares "
           << meshes.size();
  mesh = meshes.front();
  MeshDesc desc{mesh.getSymName().str(), {}};
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
    desc.axes.push_back({cast<StringAttr>(name).str(), size});
  program.mesh = std::move(desc);
  for (SubmeshOp submesh : module.getOps<SubmeshOp>()) {
    std::vector<std::string> axes;
    for (Attribute axis : submesh.getAxes())
      axes.push_back(cast<StringAttr>(axis).str());
    program.submeshes.push_back(std::move(axes));
  }
  // With FSDP, every entry input is this rank's slice of the global batch
  // (context-parallel ranks hold the same samples).
  if (auto fsdp = module->getAttrOfType<FsdpAttr>(MegDialect::kFsdpAttrName)) {
    FailureOr<uint32_t> group =
        submeshIndex(module, fsdp.getMesh(), fsdp.getBatchAxes());
    if (failed(group))
      return failure();
    inputSplit = *group;
  }
  return success();
}

FailureOr<uint32_t> ProgramBuilder::submeshIndex(Operation *user,
                                                 FlatSymbolRefAttr meshRef,
                                                 ArrayAttr axes) {
  if (!mesh || meshRef.getValue() != mesh.getSymName())
    return user->emitError() << "refers to mesh " << meshRef
                             << ", which the program does not declare";
  for (auto [index, submesh] : llvm::enumerate(module.getOps<SubmeshOp>()))
    if (submesh.getAxesAttr() == axes)
      return static_cast<uint32_t>(index);
  return user->emitError() << "uses the group " << meshRef << axes
                           << ", which is not a registered meg.submesh";
}

} // namespace megc
