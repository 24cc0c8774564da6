// One entry of a program prepared for a CUDA device: device arena, input and
// output storage, its commands with every buffer resolved to a device
// address, and the CUDA graphs of its graph regions.
#include "cuda/CudaEntry.h"

#include "AttentionCommand.h"

#include "Fail.h"
#include "FbTypes.h"
#include "cuda/CudaDriver.h"
#include "megrt/Collectives.h"

#include <algorithm>
#include <optional>

namespace megrt {
namespace {

std::vector<DeviceMemory>
allocate(const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs,
         const std::string &what) {
  std::vector<DeviceMemory> memory;
  for (uint32_t i = 0; i < sizeOf(specs); ++i) {
    const fb::TensorSpec &spec = *specs->Get(i);
    std::string name = concat(what, " '", spec.name()->str(), "'");
    memory.emplace_back(
        byteSize(toDType(spec.dtype()), toShape(spec.shape()), name), name);
  }
  return memory;
}

/// Grid or block dimensions, the missing ones 1.
std::array<unsigned, 3> launchDims(const flatbuffers::Vector<uint32_t> *dims) {
  std::array<unsigned, 3> result = {1, 1, 1};
  for (uint32_t i = 0; i < sizeOf(dims) && i < 3; ++i)
    result[i] = dims->Get(i);
  return result;
}

} // namespace

// Every address a command uses is fixed when the entry is prepared: the
// arena, inputs, outputs and copy temporary are allocated here once, and
// the parameters, kernel scratch and cuBLASLt workspace once per Session.
// Runs only change the bytes at those addresses, so a graph captured on the
// first run stays valid for every later one and is replayed as it is.
CudaEntry::CudaEntry(const fb::Entry &entry, const std::string &where,
                     const CudaEntryResources &resources,
                     const DeviceOptions &options)
    : arena_(entry.plan() ? entry.plan()->arena_bytes() : 0, where + ": arena"),
      inputs_(allocate(entry.inputs(), where + ": input")),
      outputs_(allocate(entry.outputs(), where + ": output")),
      regions_(graphRegionsOf(entry)), graphs_(regions_.size()),
      useGraphs_(options.graphs),
      collectives_(where, sizeOf(entry.commands())) {
  std::vector<CUdeviceptr> buffers;
  for (uint32_t i = 0; i < sizeOf(entry.buffers()); ++i)
    buffers.push_back(resolve(*entry.buffers()->Get(i), resources));
  std::sort(parametersUsed_.begin(), parametersUsed_.end());
  parametersUsed_.erase(
      std::unique(parametersUsed_.begin(), parametersUsed_.end()),
      parametersUsed_.end());

  // Library calls get their scratch's address when they are prepared.
  EntryLibraryCalls library = libraryCallsOf(entry, where);
  std::vector<std::optional<LibraryCallInfo>> &calls = library.calls;
  libraryScratch_ = DeviceMemory(library.scratchBytes,
                                 where + ": scratch of the library calls");

  size_t copyTempBytes = 0;
  size_t attentionScratchBytes = 0;
  std::vector<std::pair<uint32_t, std::string>> attentionNotes;
  for (uint32_t i = 0; i < sizeOf(entry.commands()); ++i) {
    const fb::Command *command = entry.commands()->Get(i);
    std::string at = concat(where, ", command ", i);
    if (const fb::KernelLaunch *launch = command->op_as_KernelLaunch()) {
      commands_.emplace_back(
          resolveKernel(*launch, buffers, resources, at + " (launch)"));
    } else if (const fb::Gemm *gemm = command->op_as_Gemm()) {
      // The device creates the cuBLASLt context for any program with a Gemm.
      CUdeviceptr bias = gemm->bias() >= 0 ? buffers[gemm->bias()] : 0;
      commands_.emplace_back(std::in_place_type<CudaGemm>, toGemmParams(*gemm),
                             buffers[gemm->a()], buffers[gemm->b()],
                             buffers[gemm->c()], bias, *resources.cublas,
                             at + " (gemm)");
    } else if (const fb::Copy *copy = command->op_as_Copy()) {
      CUdeviceptr src = buffers[copy->src()] + copy->src_offset();
      CUdeviceptr dst = buffers[copy->dst()] + copy->dst_offset();
      auto bytes = static_cast<size_t>(copy->bytes());
      if (src == dst)
        bytes = 0;
      bool overlapping = src < dst + bytes && dst < src + bytes;
      if (overlapping)
        copyTempBytes = std::max(copyTempBytes, bytes);
      commands_.emplace_back(
          Copy{src, dst, bytes, overlapping, at + " (copy)"});
    } else if (std::optional<AttentionOperands> a =
                   attentionOperands(*command)) {
      // The device loads the attention kernels for any program with one;
      // cuDNN runs what it takes.
      AttentionChoice choice = chooseAttentionKernels(
          a->shape, a->backward, a->stats >= 0, a->positions >= 0,
          resources.cudnn, resources.cudnnUnavailable, resources.computeMajor);
      // f32 attention always runs on the runtime's kernels: only the
      // choices of the dtypes cuDNN serves are worth a line.
      if (a->shape.dtype == DType::BF16 || a->shape.dtype == DType::F16)
        resources.report(concat(describeAttention(a->shape),
                                a->backward ? " backward" : " forward", ": ",
                                choice.note));
      attentionScratchBytes = std::max(attentionScratchBytes, choice.scratch);
      attentionNotes.push_back({i, choice.note});
      commands_.emplace_back(Attention{
          a->shape, a->backward, buffers[a->q], buffers[a->k], buffers[a->v],
          buffers[a->out], a->backward ? buffers[a->gradOut] : 0,
          a->backward ? buffers[a->gradQ] : 0,
          a->backward ? buffers[a->gradK] : 0,
          a->backward ? buffers[a->gradV] : 0,
          a->stats >= 0 ? buffers[static_cast<uint32_t>(a->stats)] : 0,
          a->positions >= 0 ? buffers[static_cast<uint32_t>(a->positions)] : 0,
          resources.attention, choice.cudnn});
    } else if (calls[i]) {
      std::vector<CUdeviceptr> operands;
      for (int32_t operand : calls[i]->operands)
        operands.push_back(
            operand >= 0 ? buffers[static_cast<uint32_t>(operand)] : 0);
      commands_.emplace_back(
          LibraryCall{resources.library.kernel(*calls[i]).prepare(
              *calls[i], operands, libraryScratch_.get())});
    } else if (const fb::Collective *c = command->op_as_Collective()) {
      CUdeviceptr src = buffers[c->src()];
      CUdeviceptr dst = buffers[c->dst()];
      if (findCollective(toString(c->kind()))->form == CollectiveForm::Local) {
        // Verification keeps a slice's source and destination apart.
        SliceCopy slice = toSliceCopy(*c, resources.groups);
        commands_.emplace_back(Copy{src + slice.srcOffset, dst,
                                    static_cast<size_t>(slice.bytes), false,
                                    at + " (slice)"});
      } else {
        commands_.emplace_back(toCollectiveCall(
            *c, i, resources.groups, reinterpret_cast<const void *>(src),
            reinterpret_cast<void *>(dst)));
      }
    } else if (const fb::Wait *wait = command->op_as_Wait()) {
      commands_.emplace_back(Wait{wait->collective()});
    }
  }
  copyTemp_ =
      DeviceMemory(copyTempBytes, where + ": temporary for overlapping copies");
  attentionScratch_ = DeviceMemory(
      attentionScratchBytes, where + ": scratch of the attention backward");

  for (const GraphRegion &region : regions_)
    regionWhere_.push_back(concat(where, ", graph region '", region.name,
                                  "' (commands ", region.first, " to ",
                                  region.first + region.count - 1, ")"));
  if (options.trace) {
    trace_ = std::make_unique<CudaEntryTrace>(resources.program, entry,
                                              regions_, where);
    for (const auto &[index, note] : attentionNotes)
      trace_->annotateCommand(index, "kernel", note);
  }
}

CUdeviceptr CudaEntry::resolve(const fb::Buffer &buffer,
                               const CudaEntryResources &resources) {
  switch (buffer.kind()) {
  case fb::BufferKind::arena:
    return arena_.get() + buffer.offset();
  case fb::BufferKind::parameter:
    parametersUsed_.push_back(buffer.index());
    return resources.parameters[buffer.index()] + buffer.offset();
  case fb::BufferKind::input:
    return inputs_[buffer.index()].get() + buffer.offset();
  case fb::BufferKind::output:
    return outputs_[buffer.index()].get() + buffer.offset();
  }
  return 0;
}

CudaEntry::Kernel CudaEntry::resolveKernel(
    const fb::KernelLaunch &launch, const std::vector<CUdeviceptr> &buffers,
    const CudaEntryResources &resources, const std::string &where) const {
  const fb::Kernel &kernel = *resources.program.kernels()->Get(launch.kernel());
  Kernel launches;
  const auto *dispatches =
      kernel.cuda() ? kernel.cuda()->dispatches() : nullptr;
  for (uint32_t j = 0; j < sizeOf(dispatches); ++j) {
    const fb::Dispatch &cuda = *dispatches->Get(j);
    uint32_t numArgs = sizeOf(cuda.args());
    Launch resolved{resources.module.function(launch.kernel(), j),
                    launchDims(cuda.grid()),
                    launchDims(cuda.block()),
                    cuda.shared_bytes(),
                    std::make_unique<CUdeviceptr[]>(numArgs),
                    std::make_unique<void *[]>(numArgs),
                    concat(where, ", kernel '", kernel.name()->str(),
                           "', CUDA dispatch ", j, " ('", cuda.entry()->str(),
                           "')")};
    for (uint32_t a = 0; a < numArgs; ++a) {
      const fb::DispatchArg *arg = cuda.args()->Get(a);
      // Verification keeps scratch offsets inside the kernel's scratch and
      // argument numbers below the launch's argument count.
      resolved.values[a] = arg->scratch()
                               ? resources.scratch + arg->value()
                               : buffers[launch.args()->Get(
                                     static_cast<uint32_t>(arg->value()))];
      resolved.kernelParams[a] = &resolved.values[a];
    }
    launches.push_back(std::move(resolved));
  }
  return launches;
}

void CudaEntry::execute(CUstream stream) {
  collectives_.beginRun();
  try {
    if (trace_)
      trace_->beginRun(stream);
    forEachStep(
        static_cast<uint32_t>(commands_.size()), regions_, useGraphs_,
        [&](uint32_t index) { runCommand(index, stream); },
        [&](size_t region) { runRegion(region, stream); });
    if (trace_)
      trace_->endRun(stream);
  } catch (...) {
    collectives_.abandon();
    throw;
  }
}

void CudaEntry::collectTrace(Trace &trace, const CudaEvent &origin) const {
  if (trace_)
    trace_->collect(trace, origin);
}

void CudaEntry::runCommand(uint32_t index, CUstream stream) {
  if (trace_)
    trace_->beginCommand(index, stream);
  // Outside graphs, collectives keep state between their start and their
  // Wait (the host polls the Wait against the timeout).
  if (const auto *collective = std::get_if<CollectiveCall>(&commands_[index]))
    collectives_.run(*collective, stream);
  else if (const auto *wait = std::get_if<Wait>(&commands_[index]))
    collectives_.wait(wait->collective);
  else
    enqueue(commands_[index], stream);
  if (trace_)
    trace_->endCommand(index, stream);
}

void CudaEntry::runRegion(size_t index, CUstream stream) {
  const GraphRegion &region = regions_[index];
  CudaGraph &graph = graphs_[index];
  bool capture = graph.empty();
  if (capture)
    graph = CudaGraph::capture(stream, regionWhere_[index], [&] {
      for (uint32_t i = region.first; i < region.first + region.count; ++i) {
        // In a graph the stream alone orders a collective (the verifier
        // keeps an async one and its Wait in one region): each launch runs
        // it, and its Wait has nothing left to do.
        if (const auto *call = std::get_if<CollectiveCall>(&commands_[i])) {
          if (call->group)
            call->group->enqueueCaptured(call->kind, call->src, call->dst,
                                         call->count, call->dtype, call->op,
                                         stream);
        } else if (!std::holds_alternative<Wait>(commands_[i])) {
          enqueue(commands_[i], stream);
        }
      }
    });
  if (trace_)
    trace_->beginGraph(index, stream);
  graph.launch(stream, regionWhere_[index]);
  if (trace_)
    trace_->endGraph(index, capture, stream);
}

void CudaEntry::enqueue(const Command &command, CUstream stream) const {
  if (const auto *kernel = std::get_if<Kernel>(&command)) {
    for (const Launch &launch : *kernel)
      runLaunch(launch, stream);
  } else if (const auto *gemm = std::get_if<CudaGemm>(&command)) {
    gemm->run(stream);
  } else if (const auto *a = std::get_if<Attention>(&command)) {
    if (a->cudnn && a->backward)
      a->cudnn->backward(a->shape, a->gradOut, a->q, a->k, a->v, a->out,
                         a->stats, a->gradQ, a->gradK, a->gradV,
                         attentionScratch_.get(), attentionScratch_.size(),
                         stream);
    else if (a->cudnn)
      a->cudnn->forward(a->shape, a->q, a->k, a->v, a->out, a->stats,
                        attentionScratch_.get(), attentionScratch_.size(),
                        stream);
    else if (a->backward)
      a->kernels->backward(a->shape, a->gradOut, a->q, a->k, a->v, a->out,
                           a->stats, a->gradQ, a->gradK, a->gradV, a->positions,
                           attentionScratch_.get(), attentionScratch_.size(),
                           stream);
    else
      a->kernels->forward(a->shape, a->q, a->k, a->v, a->out, a->stats,
                          a->positions, stream);
  } else if (const auto *call = std::get_if<LibraryCall>(&command)) {
    call->run(stream);
  } else if (const auto *copy = std::get_if<Copy>(&command)) {
    runCopy(*copy, stream);
  } else {
    // Verification keeps collectives that communicate, and waits, out of
    // graph regions, the only place enqueue() would meet them.
    fail("internal error: a collective or wait inside a graph region");
  }
}

void CudaEntry::runLaunch(const Launch &launch, CUstream stream) const {
  checkCuda(cudaDriver().cuLaunchKernel(
                launch.function, launch.grid[0], launch.grid[1], launch.grid[2],
                launch.block[0], launch.block[1], launch.block[2],
                launch.sharedBytes, stream, launch.kernelParams.get(), nullptr),
            "cuLaunchKernel", launch.where);
}

void CudaEntry::runCopy(const Copy &copy, CUstream stream) const {
  if (copy.bytes == 0)
    return;
  const CudaDriver &driver = cudaDriver();
  if (!copy.overlapping) {
    checkCuda(driver.cuMemcpyDtoDAsync(copy.dst, copy.src, copy.bytes, stream),
              "cuMemcpyDtoDAsync", copy.where);
    return;
  }
  // Commands run one after another on the stream, so one temporary serves
  // every overlapping copy of the entry.
  checkCuda(
      driver.cuMemcpyDtoDAsync(copyTemp_.get(), copy.src, copy.bytes, stream),
      "cuMemcpyDtoDAsync", copy.where + " (into the temporary)");
  checkCuda(
      driver.cuMemcpyDtoDAsync(copy.dst, copyTemp_.get(), copy.bytes, stream),
      "cuMemcpyDtoDAsync", copy.where + " (out of the temporary)");
}

} // namespace megrt
