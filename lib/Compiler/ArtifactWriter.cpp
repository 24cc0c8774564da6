//===- ArtifactWriter.cpp - the program as a .megc FlatBuffer ----------===//
//
// Serializes a ProgramDesc in the format of runtime/schema/megc.fbs.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

#include "megrt/ArtifactSeal.h"
#include "megrt/FormatVersion.h"
#include "megrt/megc_generated.h"

namespace megc {

/// Version of the artifact format this compiler writes; the runtime's
/// loader checks it.
constexpr uint32_t kArtifactFormatVersion = megrt::kFormatVersion;

namespace {

namespace fb = megrt::fb;

fb::DType dtypeOf(mlir::Type element) {
  if (element.isF32())
    return fb::DType::f32;
  if (element.isBF16())
    return fb::DType::bf16;
  if (element.isF16())
    return fb::DType::f16;
  if (element.isInteger(32))
    return fb::DType::i32;
  return fb::DType::i64;
}

fb::InitKind initKindOf(const std::string &kind) {
  if (kind == "ones")
    return fb::InitKind::ones;
  if (kind == "normal")
    return fb::InitKind::normal;
  if (kind == "uniform")
    return fb::InitKind::uniform;
  if (kind == "copy")
    return fb::InitKind::copy;
  return fb::InitKind::zeros;
}

fb::BufferKind bufferKindOf(BufferKind kind) {
  switch (kind) {
  case BufferKind::Arena:
    return fb::BufferKind::arena;
  case BufferKind::Parameter:
    return fb::BufferKind::parameter;
  case BufferKind::Input:
    return fb::BufferKind::input;
  case BufferKind::Output:
    return fb::BufferKind::output;
  }
  return fb::BufferKind::arena;
}

// The artifact's strategy kinds are the dialect's, value for value.
static_assert(static_cast<int>(fb::KernelStrategyKind::full_reduction) ==
              static_cast<int>(mlir::meg::KernelStrategyKind::full_reduction));
static_assert(static_cast<int>(fb::KernelStrategyKind::pointwise) ==
              static_cast<int>(mlir::meg::KernelStrategyKind::pointwise));

// The artifact's schedule enums are the dialect's, value for value.
static_assert(static_cast<int>(fb::LrScheduleKind::wsd) ==
              static_cast<int>(mlir::meg::LrScheduleKind::wsd));
static_assert(static_cast<int>(fb::WsdDecayStyle::minus_sqrt) ==
              static_cast<int>(mlir::meg::WsdDecayStyle::minus_sqrt));

class Writer {
public:
  flatbuffers::Offset<fb::LrSchedule>
  writeLrSchedule(const ProgramDesc &program) {
    if (!program.lrSchedule)
      return 0;
    const LrScheduleDesc &s = *program.lrSchedule;
    return fb::CreateLrSchedule(
        builder, static_cast<fb::LrScheduleKind>(s.kind), s.maxLr, s.minLr,
        s.initLr, s.warmup, s.decay, s.wsdDecay,
        static_cast<fb::WsdDecayStyle>(s.wsdStyle), s.lrParameter,
        s.stepParameter);
  }

  flatbuffers::Offset<fb::PipelineSchedule>
  writePipeline(const ProgramDesc &program) {
    if (!program.pipeline)
      return 0;
    const ProgramDesc::Pipeline &p = *program.pipeline;
    return fb::CreatePipelineScheduleDirect(builder, p.schedule.c_str(),
                                            p.ranks, p.chunks, p.microBatches);
  }

  std::string write(const ProgramDesc &program, const CpuModuleDesc *cpuModule,
                    const CudaModuleDesc *cudaModule) {
    std::vector<flatbuffers::Offset<fb::Parameter>> parameters;
    for (const ParameterDesc &param : program.parameters) {
      flatbuffers::Offset<fb::Sharding> sharding = 0;
      if (param.shardSubmesh >= 0)
        sharding = fb::CreateShardingDirect(builder, param.shardSubmesh,
                                            &param.fullShape, param.shardDim,
                                            param.blockSubmesh);
      parameters.push_back(fb::CreateParameter(
          builder, builder.CreateString(param.name),
          dtypeOf(param.type.getElementType()), shape(param.type),
          param.trainable, initKindOf(param.initKind), param.initScale,
          sharding, param.state,
          param.initSource.empty() ? 0 : builder.CreateString(param.initSource),
          param.aliases.empty() ? 0
                                : builder.CreateVectorOfStrings(param.aliases),
          param.nonNegative,
          param.parts.empty() ? 0 : builder.CreateVectorOfStrings(param.parts),
          param.pipelineSubmesh, param.pipelineOwner));
    }
    flatbuffers::Offset<fb::Mesh> mesh = 0;
    if (program.mesh) {
      std::vector<flatbuffers::Offset<fb::MeshAxis>> axes;
      for (const auto &[name, size] : program.mesh->axes)
        axes.push_back(
            fb::CreateMeshAxis(builder, builder.CreateString(name), size));
      mesh = fb::CreateMesh(builder, builder.CreateString(program.mesh->name),
                            builder.CreateVector(axes));
    }
    std::vector<flatbuffers::Offset<fb::Submesh>> submeshes;
    for (const std::vector<std::string> &axes : program.submeshes)
      submeshes.push_back(
          fb::CreateSubmesh(builder, builder.CreateVectorOfStrings(axes)));
    std::vector<flatbuffers::Offset<fb::Entry>> entries;
    for (const EntryDesc &entry : program.entries)
      entries.push_back(writeEntry(entry));
    std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
    for (auto [index, kernel] : llvm::enumerate(program.kernels))
      kernels.push_back(fb::CreateKernel(
          builder, builder.CreateString(kernel.name), kernel.numArgs,
          cpuModule ? writeCode(cpuModule->kernels[index], /*cpu=*/true) : 0,
          cudaModule ? writeCode(cudaModule->kernels[index], /*cpu=*/false)
                     : 0));
    flatbuffers::Offset<fb::CpuModule> cpu;
    if (cpuModule) {
      const std::string &so = cpuModule->sharedObject;
      cpu = fb::CreateCpuModule(
          builder, builder.CreateString("x86_64-unknown-linux-gnu"),
          builder.CreateVector(reinterpret_cast<const uint8_t *>(so.data()),
                               so.size()),
          builder.CreateVectorOfStrings(cpuModule->features));
    }
    flatbuffers::Offset<fb::CudaModule> cuda;
    if (cudaModule)
      cuda = fb::CreateCudaModule(
          builder, builder.CreateString(cudaModule->arch),
          builder.CreateString(cudaModule->ptx),
          builder.CreateVector(
              reinterpret_cast<const uint8_t *>(cudaModule->cubin.data()),
              cudaModule->cubin.size()));
    auto root = fb::CreateProgram(
        builder, kArtifactFormatVersion, builder.CreateString("megc"),
        builder.CreateVector(parameters), builder.CreateVector(entries),
        builder.CreateVector(kernels), cpu, cuda, mesh,
        builder.CreateVector(submeshes), /*checksum=*/1,
        program.hfConfig.empty() ? 0 : builder.CreateString(program.hfConfig),
        writeLrSchedule(program), program.memoryBudget, writePipeline(program));
    // The placeholder makes FlatBuffers store the field; sealing fills it.
    fb::FinishProgramBuffer(builder, root);
    std::string bytes(
        reinterpret_cast<const char *>(builder.GetBufferPointer()),
        builder.GetSize());
    megrt::sealArtifact(reinterpret_cast<uint8_t *>(bytes.data()),
                        bytes.size());
    return bytes;
  }

private:
  /// A CPU grid is one-dimensional and has no blocks.
  flatbuffers::Offset<fb::KernelCode> writeCode(const KernelCodeDesc &code,
                                                bool cpu) {
    std::vector<flatbuffers::Offset<fb::Dispatch>> dispatches;
    for (const DispatchDesc &dispatch : code.dispatches) {
      std::vector<fb::DispatchArg> args;
      for (const DispatchArgDesc &arg : dispatch.args)
        args.emplace_back(arg.scratch, arg.value);
      dispatches.push_back(fb::CreateDispatch(
          builder, builder.CreateString(dispatch.entry),
          builder.CreateVector(dispatch.grid.data(),
                               cpu ? 1 : dispatch.grid.size()),
          builder.CreateVector(dispatch.block.data(),
                               cpu ? 0 : dispatch.block.size()),
          dispatch.sharedBytes, builder.CreateVectorOfStructs(args)));
    }
    const KernelStrategyDesc &strategy = code.strategy;
    std::optional<mlir::meg::KernelStrategyKind> kind =
        mlir::meg::symbolizeKernelStrategyKind(strategy.kind);
    auto strategyOffset = fb::CreateKernelStrategy(
        builder,
        static_cast<fb::KernelStrategyKind>(kind ? static_cast<int>(*kind) : 0),
        builder.CreateVector(strategy.domain),
        builder.CreateVector(strategy.tile), strategy.vectorWidth);
    return fb::CreateKernelCode(builder, strategyOffset,
                                builder.CreateVector(dispatches),
                                code.scratchBytes);
  }

  flatbuffers::Offset<flatbuffers::Vector<int64_t>>
  shape(mlir::RankedTensorType type) {
    return builder.CreateVector(type.getShape().data(), type.getRank());
  }

  flatbuffers::Offset<fb::TensorSpec> spec(const TensorSpec &tensor) {
    return fb::CreateTensorSpec(
        builder, builder.CreateString(tensor.name),
        dtypeOf(tensor.type.getElementType()), shape(tensor.type), tensor.split,
        tensor.indexBound,
        tensor.indexUse.empty() ? 0 : builder.CreateString(tensor.indexUse),
        tensor.indexIgnore ? flatbuffers::Optional<int64_t>(*tensor.indexIgnore)
                           : flatbuffers::nullopt);
  }

  flatbuffers::Offset<fb::Command> command(const Command &command) {
    if (auto *launch = std::get_if<LaunchCommand>(&command)) {
      auto op = fb::CreateKernelLaunch(builder, launch->kernel,
                                       builder.CreateVector(launch->args));
      return fb::CreateCommand(builder, fb::CommandOp::KernelLaunch,
                               op.Union());
    }
    if (auto *gemm = std::get_if<GemmCommand>(&command)) {
      auto op = fb::CreateGemm(builder, gemm->a, gemm->b, gemm->c, gemm->bias,
                               gemm->m, gemm->n, gemm->k, gemm->batch,
                               gemm->strideA, gemm->strideB, gemm->strideC,
                               gemm->transA, gemm->transB, 1.0f,
                               gemm->accumulate ? 1.0f : 0.0f, dtype,
                               gemm->geluEpilogue ? fb::GemmEpilogue::gelu_tanh
                                                  : fb::GemmEpilogue::none);
      return fb::CreateCommand(builder, fb::CommandOp::Gemm, op.Union());
    }
    if (auto *attention = std::get_if<AttentionCommand>(&command)) {
      fb::AttentionDims dims(
          attention->batch, attention->seqQ, attention->seqKv, attention->heads,
          attention->kvHeads, attention->headDim, attention->valueDim,
          attention->causal, attention->scale);
      if (attention->backward) {
        auto op = fb::CreateAttentionGrad(
            builder, attention->gradOut, attention->q, attention->k,
            attention->v, attention->out, attention->gradQ, attention->gradK,
            attention->gradV, &dims, dtype, attention->stats,
            attention->positions);
        return fb::CreateCommand(builder, fb::CommandOp::AttentionGrad,
                                 op.Union());
      }
      auto op = fb::CreateAttention(builder, attention->q, attention->k,
                                    attention->v, attention->out, &dims, dtype,
                                    attention->stats, attention->positions);
      return fb::CreateCommand(builder, fb::CommandOp::Attention, op.Union());
    }
    if (auto *call = std::get_if<LibraryCallCommand>(&command)) {
      auto op =
          fb::CreateLibraryCall(builder, builder.CreateString(call->kernel),
                                builder.CreateVector(call->operands),
                                builder.CreateVector(call->params));
      return fb::CreateCommand(builder, fb::CommandOp::LibraryCall, op.Union());
    }
    if (auto *collective = std::get_if<CollectiveCommand>(&command)) {
      auto kind =
          builder.CreateString(megrt::collectiveInfo(collective->kind).name);
      fb::ReduceOp reduce =
          collective->reduce == CollectiveCommand::Reduce::Avg
              ? fb::ReduceOp::avg
          : collective->reduce == CollectiveCommand::Reduce::Max
              ? fb::ReduceOp::max
              : fb::ReduceOp::sum;
      auto op = fb::CreateCollective(builder, kind, collective->submesh, reduce,
                                     dtype, collective->count, collective->src,
                                     collective->dst, collective->async,
                                     builder.CreateVector(collective->params));
      return fb::CreateCommand(builder, fb::CommandOp::Collective, op.Union());
    }
    if (auto *wait = std::get_if<WaitCommand>(&command)) {
      auto op = fb::CreateWait(builder, wait->collective);
      return fb::CreateCommand(builder, fb::CommandOp::Wait, op.Union());
    }
    const auto &copy = std::get<CopyCommand>(command);
    auto op = fb::CreateCopy(builder, copy.src, copy.dst, 0, 0, copy.bytes);
    return fb::CreateCommand(builder, fb::CommandOp::Copy, op.Union());
  }

  flatbuffers::Offset<fb::Entry> writeEntry(const EntryDesc &entry) {
    std::vector<flatbuffers::Offset<fb::TensorSpec>> inputs, outputs;
    for (const TensorSpec &input : entry.inputs)
      inputs.push_back(spec(input));
    for (const TensorSpec &output : entry.outputs)
      outputs.push_back(spec(output));
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
    for (const BufferDesc &buffer : entry.buffers)
      buffers.push_back(fb::CreateBuffer(
          builder, bufferKindOf(buffer.kind), buffer.index, buffer.offset,
          buffer.sizeBytes(), dtypeOf(buffer.type.getElementType()),
          shape(buffer.type)));
    std::vector<flatbuffers::Offset<fb::Command>> commands;
    for (const Command &cmd : entry.commands) {
      if (auto *gemm = std::get_if<GemmCommand>(&cmd))
        dtype = dtypeOf(entry.buffers[gemm->c].type.getElementType());
      if (auto *attention = std::get_if<AttentionCommand>(&cmd))
        dtype = dtypeOf(entry.buffers[attention->q].type.getElementType());
      if (auto *collective = std::get_if<CollectiveCommand>(&cmd))
        dtype = dtypeOf(entry.buffers[collective->src].type.getElementType());
      commands.push_back(command(cmd));
    }
    auto plan =
        fb::CreateMemoryPlan(builder, entry.plan.arenaBytes,
                             entry.plan.peakBytes, entry.plan.unplannedBytes);
    std::vector<flatbuffers::Offset<fb::GraphRegion>> graphs;
    for (const GraphRegionDesc &graph : entry.graphs)
      graphs.push_back(fb::CreateGraphRegion(
          builder, builder.CreateString(graph.name), graph.first, graph.count,
          graph.shareIo, graph.forwardOnly));
    return fb::CreateEntry(
        builder, builder.CreateString(entry.name), builder.CreateVector(inputs),
        builder.CreateVector(outputs), builder.CreateVector(buffers),
        builder.CreateVector(commands), plan, builder.CreateVector(graphs),
        entry.flops(), entry.flops(/*onlyRecomputed=*/true), entry.stageSubmesh,
        entry.pipelineRank);
  }

  flatbuffers::FlatBufferBuilder builder;
  fb::DType dtype = fb::DType::f32;
};

} // namespace

std::string serializeProgram(const ProgramDesc &program,
                             const CpuModuleDesc *cpu,
                             const CudaModuleDesc *cuda) {
  return Writer().write(program, cpu, cuda);
}

} // namespace megc
