// One entry of a program prepared for the CPU: arena, input and output
// storage, and its commands with every buffer resolved to an address.
#include "cpu/CpuEntry.h"

#include "AttentionCommand.h"
#include "Fail.h"
#include "FbTypes.h"
#include "TraceLabels.h"
#include "cpu/CpuAttention.h"
#include "megrt/Collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

namespace megrt {
namespace {
std::vector<Tensor> allocate(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs) {
  std::vector<Tensor> tensors;
  for (uint32_t i = 0; i < sizeOf(specs); ++i)
    tensors.emplace_back(toDType(specs->Get(i)->dtype()),
                         toShape(specs->Get(i)->shape()));
  return tensors;
}
} // namespace

CpuEntry::CpuEntry(const fb::Program &program, const fb::Entry &entry,
                   std::vector<Tensor> &parameters, const CpuModule &module,
                   const SubmeshGroups &groups, const DeviceOptions &options,
                   ThreadPool &pool, uint8_t *scratch)
    : pool_(pool), arena_(entry.plan() ? entry.plan()->arena_bytes() : 0),
      inputs_(allocate(entry.inputs())), outputs_(allocate(entry.outputs())),
      graphs_(options.graphs), trace_(options.trace),
      observer_(options.kernelObserver),
      collectives_(concat("entry '", toString(entry.name()), "'"),
                   sizeOf(entry.commands())) {
  std::vector<uint8_t *> buffers;
  for (uint32_t i = 0; i < sizeOf(entry.buffers()); ++i)
    buffers.push_back(resolve(*entry.buffers()->Get(i), parameters));
  // Library calls get their scratch's address when they are prepared.
  std::string where = concat("entry '", toString(entry.name()), "'");
  EntryLibraryCalls library = libraryCallsOf(entry, where);
  std::vector<std::optional<LibraryCallInfo>> &calls = library.calls;
  libraryScratch_ = AlignedBuffer(library.scratchBytes);

  for (uint32_t i = 0; i < sizeOf(entry.commands()); ++i) {
    const fb::Command *command = entry.commands()->Get(i);
    if (trace_)
      commandLabels_.push_back(commandLabel(program, *command, i));
    if (const fb::KernelLaunch *launch = command->op_as_KernelLaunch()) {
      // Verification keeps every argument number below the launch's
      // argument count and every scratch offset inside the kernel's scratch.
      const fb::KernelCode &code =
          *program.kernels()->Get(launch->kernel())->cpu();
      Launch resolved;
      resolved.kernel = launch->kernel();
      for (uint32_t a = 0; a < sizeOf(launch->args()); ++a) {
        uint32_t buffer = launch->args()->Get(a);
        resolved.arguments.push_back(
            {buffers[buffer], entry.buffers()->Get(buffer)->size_bytes()});
      }
      for (uint32_t j = 0; j < sizeOf(code.dispatches()); ++j) {
        const fb::Dispatch &dispatch = *code.dispatches()->Get(j);
        Dispatch &target = resolved.dispatches.emplace_back();
        target.entry = module.dispatch(launch->kernel(), j);
        target.grid = dispatch.grid()->Get(0);
        for (uint32_t a = 0; a < sizeOf(dispatch.args()); ++a) {
          const fb::DispatchArg *arg = dispatch.args()->Get(a);
          target.args.push_back(
              arg->scratch() ? scratch + arg->value()
                             : buffers[launch->args()->Get(
                                   static_cast<uint32_t>(arg->value()))]);
        }
      }
      commands_.emplace_back(std::move(resolved));
    } else if (const fb::Gemm *gemm = command->op_as_Gemm()) {
      const uint8_t *bias = gemm->bias() >= 0 ? buffers[gemm->bias()] : nullptr;
      commands_.emplace_back(std::in_place_type<CpuGemm>, toGemmParams(*gemm),
                             buffers[gemm->a()], buffers[gemm->b()],
                             buffers[gemm->c()], bias);
    } else if (const fb::Copy *copy = command->op_as_Copy()) {
      commands_.emplace_back(Copy{buffers[copy->src()] + copy->src_offset(),
                                  buffers[copy->dst()] + copy->dst_offset(),
                                  static_cast<size_t>(copy->bytes())});
    } else if (std::optional<AttentionOperands> a =
                   attentionOperands(*command)) {
      commands_.emplace_back(Attention{
          a->shape, a->backward, buffers[a->q], buffers[a->k], buffers[a->v],
          buffers[a->out], a->backward ? buffers[a->gradOut] : nullptr,
          a->backward ? buffers[a->gradQ] : nullptr,
          a->backward ? buffers[a->gradK] : nullptr,
          a->backward ? buffers[a->gradV] : nullptr,
          // Verification keeps every buffer's offset a multiple of its
          // element size, so the f32 statistics are aligned.
          a->stats >= 0 ? reinterpret_cast<float *>(
                              buffers[static_cast<uint32_t>(a->stats)])
                        : nullptr,
          a->positions >= 0 ? reinterpret_cast<const int32_t *>(
                                  buffers[static_cast<uint32_t>(a->positions)])
                            : nullptr});
    } else if (calls[i]) {
      std::vector<void *> operands;
      for (int32_t operand : calls[i]->operands)
        operands.push_back(
            operand >= 0 ? buffers[static_cast<uint32_t>(operand)] : nullptr);
      commands_.emplace_back(LibraryCall{
          prepareCpuLibraryCall(*calls[i], operands, libraryScratch_.data())});
    } else if (const fb::Collective *c = command->op_as_Collective()) {
      if (findCollective(toString(c->kind()))->form == CollectiveForm::Local) {
        SliceCopy slice = toSliceCopy(*c, groups);
        commands_.emplace_back(Copy{buffers[c->src()] + slice.srcOffset,
                                    buffers[c->dst()],
                                    static_cast<size_t>(slice.bytes)});
      } else {
        commands_.emplace_back(toCollectiveCall(
            *c, i, groups, buffers[c->src()], buffers[c->dst()]));
      }
    } else if (const fb::Wait *wait = command->op_as_Wait()) {
      commands_.emplace_back(Wait{wait->collective()});
    }
  }
  regions_ = graphRegionsOf(entry);
  recorded_.resize(regions_.size());
  if (trace_)
    entryLabel_ = entryLabel(entry);
}

uint8_t *CpuEntry::resolve(const fb::Buffer &buffer,
                           std::vector<Tensor> &parameters) {
  switch (buffer.kind()) {
  case fb::BufferKind::arena:
    return arena_.data() + buffer.offset();
  case fb::BufferKind::parameter:
    return parameters[buffer.index()].data() + buffer.offset();
  case fb::BufferKind::input:
    return inputs_[buffer.index()].data() + buffer.offset();
  case fb::BufferKind::output:
    return outputs_[buffer.index()].data() + buffer.offset();
  }
  return nullptr;
}

template <typename Work>
void CpuEntry::timed(const TraceLabel &label, Work &&work) {
  if (!trace_) {
    work();
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();
  double startMicros = trace_->hostMicros(start);
  work();
  trace_->add(
      label, startMicros,
      std::chrono::duration<double, std::micro>(Clock::now() - start).count());
}

void CpuEntry::execute() {
  collectives_.beginRun();
  try {
    timed(entryLabel_, [&] {
      forEachStep(
          static_cast<uint32_t>(commands_.size()), regions_, graphs_,
          [&](uint32_t index) { runCommand(index); },
          [&](size_t region) { runRegion(region); });
    });
  } catch (...) {
    collectives_.abandon();
    throw;
  }
}

void CpuEntry::runCommand(uint32_t index) {
  if (trace_)
    timed(commandLabels_[index], [&] { run(commands_[index]); });
  else
    run(commands_[index]);
}

void CpuEntry::runRegion(size_t region) {
  std::vector<Command *> &recorded = recorded_[region];
  bool record = recorded.empty();
  auto runRecorded = [&] {
    if (record) {
      const GraphRegion &spec = regions_[region];
      for (uint32_t i = 0; i < spec.count; ++i)
        recorded.push_back(&commands_[spec.first + i]);
      ++recordings_;
    } else {
      ++replays_;
    }
    for (Command *command : recorded)
      run(*command);
  };
  if (trace_)
    timed(graphLabel(regions_[region], /*capture=*/record), runRecorded);
  else
    runRecorded();
}

void CpuEntry::run(Command &command) {
  if (auto *launch = std::get_if<Launch>(&command)) {
    if (observer_)
      observer_->beforeLaunch(launch->kernel, launch->arguments);
    for (Dispatch &dispatch : launch->dispatches) {
      void **args = dispatch.args.data();
      pool_.parallelFor(dispatch.grid, [&](uint32_t workgroup) {
        dispatch.entry(args, workgroup, dispatch.grid);
      });
    }
    if (observer_)
      observer_->afterLaunch(launch->kernel, launch->arguments);
  } else if (auto *gemm = std::get_if<CpuGemm>(&command)) {
    gemm->run(pool_);
  } else if (auto *a = std::get_if<Attention>(&command)) {
    if (a->backward)
      attentionBackward(pool_, a->shape, a->gradOut, a->q, a->k, a->v, a->out,
                        a->stats, a->gradQ, a->gradK, a->gradV, a->positions);
    else
      attentionForward(pool_, a->shape, a->q, a->k, a->v, a->out, a->stats,
                       a->positions);
  } else if (auto *call = std::get_if<LibraryCall>(&command)) {
    call->run(pool_);
  } else if (auto *copy = std::get_if<Copy>(&command)) {
    // Verification allows overlapping source and destination.
    std::memmove(copy->dst, copy->src, copy->bytes);
  } else if (auto *collective = std::get_if<CollectiveCall>(&command)) {
    collectives_.run(*collective, /*stream=*/nullptr);
  } else {
    collectives_.wait(std::get<Wait>(command).collective);
  }
}

} // namespace megrt
