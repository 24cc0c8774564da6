// Plain descriptions of artifacts, turned into FlatBuffers bytes for tests.
#include "ArtifactBuilder.h"

#include "megrt/ArtifactSeal.h"

#include "megrt/DType.h"

namespace megrt::test {
namespace {
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<fb::TensorSpec> buildTensorSpec(FlatBufferBuilder &builder,
                                       const TensorDesc &desc) {
  return fb::CreateTensorSpecDirect(builder, desc.name.c_str(), desc.dtype,
                                    &desc.shape, desc.split);
}

std::vector<Offset<fb::TensorSpec>>
buildTensorSpecs(FlatBufferBuilder &builder,
                 const std::vector<TensorDesc> &descs) {
  std::vector<Offset<fb::TensorSpec>> specs;
  for (const TensorDesc &desc : descs)
    specs.push_back(buildTensorSpec(builder, desc));
  return specs;
}

Offset<fb::Parameter> buildParameter(FlatBufferBuilder &builder,
                                     const ParamDesc &desc) {
  Offset<fb::Sharding> sharding = 0;
  if (desc.sharding)
    sharding = fb::CreateShardingDirect(
        builder, desc.sharding->submesh, &desc.sharding->fullShape,
        desc.sharding->dim, desc.sharding->blockSubmesh);
  std::vector<Offset<flatbuffers::String>> parts;
  for (const std::string &part : desc.parts)
    parts.push_back(builder.CreateString(part));
  return fb::CreateParameterDirect(
      builder, desc.name.c_str(), desc.dtype, &desc.shape, desc.trainable,
      desc.init, desc.scale, sharding, desc.state,
      desc.initSource.empty() ? nullptr : desc.initSource.c_str(),
      /*aliases=*/nullptr, /*non_negative=*/false,
      parts.empty() ? nullptr : &parts);
}

uint64_t defaultSize(const BufferDesc &desc) {
  uint64_t count = 1;
  for (int64_t dim : desc.shape)
    count *= static_cast<uint64_t>(dim < 0 ? 0 : dim);
  if (desc.dtype < fb::DType::MIN || desc.dtype > fb::DType::MAX)
    return count;
  return count * elementSize(static_cast<DType>(desc.dtype));
}

Offset<fb::Command> buildCommand(FlatBufferBuilder &builder,
                                 const CommandDesc &desc) {
  if (const auto *launch = std::get_if<LaunchDesc>(&desc)) {
    auto op =
        fb::CreateKernelLaunchDirect(builder, launch->kernel, &launch->args);
    return fb::CreateCommand(builder, fb::CommandOp::KernelLaunch, op.Union());
  }
  if (const auto *gemm = std::get_if<GemmDesc>(&desc)) {
    auto op =
        fb::CreateGemm(builder, gemm->a, gemm->b, gemm->c, gemm->bias, gemm->m,
                       gemm->n, gemm->k, gemm->batch, gemm->strideA,
                       gemm->strideB, gemm->strideC, gemm->transA, gemm->transB,
                       gemm->alpha, gemm->beta, gemm->dtype, gemm->epilogue);
    return fb::CreateCommand(builder, fb::CommandOp::Gemm, op.Union());
  }
  if (const auto *copy = std::get_if<CopyDesc>(&desc)) {
    auto op = fb::CreateCopy(builder, copy->src, copy->dst, copy->srcOffset,
                             copy->dstOffset, copy->bytes);
    return fb::CreateCommand(builder, fb::CommandOp::Copy, op.Union());
  }
  if (const auto *c = std::get_if<CollectiveDesc>(&desc)) {
    auto op = fb::CreateCollective(
        builder, builder.CreateString(c->kind), c->submesh, c->reduce, c->dtype,
        c->count, c->src, c->dst, c->async, builder.CreateVector(c->params));
    return fb::CreateCommand(builder, fb::CommandOp::Collective, op.Union());
  }
  if (const auto *call = std::get_if<LibraryCallDesc>(&desc)) {
    auto op = fb::CreateLibraryCall(builder, builder.CreateString(call->name),
                                    builder.CreateVector(call->operands),
                                    builder.CreateVector(call->params));
    return fb::CreateCommand(builder, fb::CommandOp::LibraryCall, op.Union());
  }
  if (const auto *a = std::get_if<AttentionDesc>(&desc)) {
    fb::AttentionDims dims(a->batch, a->seqQ, a->seqKv, a->heads, a->kvHeads,
                           a->headDim, a->valueDim, a->causal, a->scale);
    if (a->backward) {
      auto op = fb::CreateAttentionGrad(builder, a->gradOut, a->q, a->k, a->v,
                                        a->out, a->gradQ, a->gradK, a->gradV,
                                        &dims, a->dtype, a->stats);
      return fb::CreateCommand(builder, fb::CommandOp::AttentionGrad,
                               op.Union());
    }
    auto op = fb::CreateAttention(builder, a->q, a->k, a->v, a->out, &dims,
                                  a->dtype, a->stats);
    return fb::CreateCommand(builder, fb::CommandOp::Attention, op.Union());
  }
  if (const auto *wait = std::get_if<WaitDesc>(&desc)) {
    auto op = fb::CreateWait(builder, wait->collective);
    return fb::CreateCommand(builder, fb::CommandOp::Wait, op.Union());
  }
  return fb::CreateCommand(builder);
}

Offset<fb::KernelCode> buildCode(FlatBufferBuilder &builder,
                                 const std::vector<DispatchDesc> &dispatches,
                                 uint64_t scratchBytes, bool cpu) {
  std::vector<Offset<fb::Dispatch>> offsets;
  for (const DispatchDesc &dispatch : dispatches) {
    std::vector<fb::DispatchArg> args;
    for (const DispatchArgDesc &arg : dispatch.args)
      args.emplace_back(arg.scratch, arg.value);
    std::vector<uint32_t> block =
        cpu ? std::vector<uint32_t>() : dispatch.block;
    offsets.push_back(fb::CreateDispatchDirect(builder, dispatch.entry.c_str(),
                                               &dispatch.grid, &block,
                                               dispatch.sharedBytes, &args));
  }
  auto strategy = fb::CreateKernelStrategy(builder);
  return fb::CreateKernelCodeDirect(builder, strategy, &offsets, scratchBytes);
}

Offset<fb::Kernel> buildKernel(FlatBufferBuilder &builder,
                               const KernelDesc &desc) {
  std::vector<DispatchDesc> cpuDispatches = desc.cpuDispatches;
  if (cpuDispatches.empty() && !desc.cpuSymbol.empty()) {
    DispatchDesc whole;
    whole.entry = desc.cpuSymbol;
    for (uint32_t i = 0; i < desc.numArgs; ++i)
      whole.args.push_back(kernelArg(i));
    cpuDispatches.push_back(whole);
  }
  Offset<fb::KernelCode> cpu = 0, cuda = 0;
  if (!cpuDispatches.empty())
    cpu = buildCode(builder, cpuDispatches, desc.cpuScratchBytes, true);
  if (!desc.cudaLaunches.empty())
    cuda = buildCode(builder, desc.cudaLaunches, desc.cudaScratchBytes, false);
  return fb::CreateKernelDirect(builder, desc.name.c_str(), desc.numArgs, cpu,
                                cuda);
}

Offset<fb::Entry> buildEntry(FlatBufferBuilder &builder,
                             const EntryDesc &desc) {
  auto inputs = buildTensorSpecs(builder, desc.inputs);
  auto outputs = buildTensorSpecs(builder, desc.outputs);
  std::vector<Offset<fb::Buffer>> buffers;
  for (const BufferDesc &buffer : desc.buffers)
    buffers.push_back(fb::CreateBufferDirect(
        builder, buffer.kind, buffer.index, buffer.offset,
        buffer.sizeBytes.value_or(defaultSize(buffer)), buffer.dtype,
        &buffer.shape));
  std::vector<Offset<fb::Command>> commands;
  for (const CommandDesc &command : desc.commands)
    commands.push_back(buildCommand(builder, command));
  auto plan = fb::CreateMemoryPlan(builder, desc.arenaBytes, desc.peakBytes,
                                   desc.unplannedBytes);
  std::vector<Offset<fb::GraphRegion>> graphs;
  for (const GraphDesc &graph : desc.graphs)
    graphs.push_back(fb::CreateGraphRegionDirect(
        builder, graph.name.c_str(), graph.first, graph.count, graph.shareIo,
        graph.forwardOnly));
  return fb::CreateEntryDirect(builder, desc.name.c_str(), &inputs, &outputs,
                               &buffers, &commands, plan,
                               desc.graphs.empty() ? nullptr : &graphs);
}
} // namespace

std::vector<uint8_t> buildArtifact(const ProgramDesc &desc) {
  FlatBufferBuilder builder;
  std::vector<Offset<fb::Parameter>> params;
  for (const ParamDesc &param : desc.params)
    params.push_back(buildParameter(builder, param));
  std::vector<Offset<fb::Entry>> entries;
  for (const EntryDesc &entry : desc.entries)
    entries.push_back(buildEntry(builder, entry));
  std::vector<Offset<fb::Kernel>> kernels;
  for (const KernelDesc &kernel : desc.kernels)
    kernels.push_back(buildKernel(builder, kernel));
  Offset<fb::CpuModule> cpu = 0;
  if (desc.cpuObject) {
    std::vector<Offset<flatbuffers::String>> features;
    for (const std::string &feature : desc.cpuFeatures)
      features.push_back(builder.CreateString(feature));
    cpu = fb::CreateCpuModuleDirect(builder, desc.targetTriple.c_str(),
                                    &*desc.cpuObject, &features);
  }
  Offset<fb::CudaModule> cuda = 0;
  if (desc.cuda)
    cuda =
        fb::CreateCudaModuleDirect(builder, desc.cuda->arch.c_str(),
                                   desc.cuda->ptx.c_str(), &desc.cuda->cubin);
  Offset<fb::Mesh> mesh = 0;
  if (desc.mesh) {
    std::vector<Offset<fb::MeshAxis>> axes;
    for (const auto &[name, size] : desc.mesh->axes)
      axes.push_back(fb::CreateMeshAxisDirect(builder, name.c_str(), size));
    mesh = fb::CreateMeshDirect(builder, desc.mesh->name.c_str(), &axes);
  }
  std::vector<Offset<fb::Submesh>> submeshes;
  for (const std::vector<std::string> &axes : desc.submeshes) {
    std::vector<Offset<flatbuffers::String>> names;
    for (const std::string &axis : axes)
      names.push_back(builder.CreateString(axis));
    submeshes.push_back(fb::CreateSubmeshDirect(builder, &names));
  }
  // A non-zero placeholder so that the checksum field is stored.
  auto root = fb::CreateProgramDirect(
      builder, desc.formatVersion, desc.producer.c_str(), &params, &entries,
      &kernels, cpu, cuda, mesh, desc.submeshes.empty() ? nullptr : &submeshes,
      /*checksum=*/1);
  fb::FinishProgramBuffer(builder, root);
  std::vector<uint8_t> bytes(builder.GetBufferPointer(),
                             builder.GetBufferPointer() + builder.GetSize());
  megrt::sealArtifact(bytes.data(), bytes.size());
  return bytes;
}

BufferDesc arenaBuffer(uint64_t offset, Shape shape, fb::DType dtype) {
  return {fb::BufferKind::arena, 0, offset, dtype, std::move(shape), {}};
}
BufferDesc inputBuffer(uint32_t index, Shape shape, fb::DType dtype) {
  return {fb::BufferKind::input, index, 0, dtype, std::move(shape), {}};
}
BufferDesc outputBuffer(uint32_t index, Shape shape, fb::DType dtype) {
  return {fb::BufferKind::output, index, 0, dtype, std::move(shape), {}};
}
BufferDesc paramBuffer(uint32_t index, Shape shape, fb::DType dtype) {
  return {fb::BufferKind::parameter, index, 0, dtype, std::move(shape), {}};
}

} // namespace megrt::test
