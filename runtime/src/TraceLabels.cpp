// What the trace shows for each command, graph region and entry run, the
// same on every device.
#include "TraceLabels.h"

#include "AttentionCommand.h"

#include "FbTypes.h"
#include "megrt/Collectives.h"
#include "megrt/LibraryKernels.h"

#include <string>
#include <utility>

namespace megrt {
namespace {

/// The ranks of a group of submesh `index` and its axes ("dp_outer,dp_shard").
std::pair<int64_t, std::string> submeshOf(const fb::Program &program,
                                          uint32_t index) {
  const fb::Submesh &submesh = *program.submeshes()->Get(index);
  int64_t size = 1;
  std::string axes;
  for (uint32_t i = 0; i < sizeOf(submesh.axes()); ++i) {
    std::string name = toString(submesh.axes()->Get(i));
    axes += (i ? "," : "") + name;
    for (uint32_t a = 0; a < sizeOf(program.mesh()->axes()); ++a)
      if (toString(program.mesh()->axes()->Get(a)->name()) == name)
        size *= program.mesh()->axes()->Get(a)->size();
  }
  return {size, axes};
}

/// Named after its kind; bytes is the larger of its source and destination
/// on this rank (count x group size elements for an all_gather or a
/// reduce_scatter), or what a slice copies.
TraceLabel collectiveLabel(const fb::Program &program,
                           const fb::Collective &collective, TraceArgs &args) {
  auto [groupSize, axes] = submeshOf(program, collective.submesh());
  DType dtype = toDType(collective.dtype());
  int64_t elements = static_cast<int64_t>(collective.count());
  // Verification named a known kind.
  const CollectiveInfo &info = *findCollective(toString(collective.kind()));
  if (info.communicates && (info.sourceWhole || info.destinationWhole))
    elements *= groupSize;
  args.number("submesh", collective.submesh())
      .text("axes", axes)
      .number("ranks", groupSize)
      .number("count", static_cast<int64_t>(collective.count()))
      .text("dtype", dtypeName(dtype))
      .number("bytes", elements * static_cast<int64_t>(elementSize(dtype)))
      .flag("async", collective.async());
  if (info.reduces)
    args.text("reduce", fb::EnumNameReduceOp(collective.reduce()));
  return {info.name, "collective", args.str()};
}

} // namespace

TraceLabel commandLabel(const fb::Program &program, const fb::Command &command,
                        uint32_t index) {
  TraceArgs args;
  args.number("command", index);
  if (const fb::KernelLaunch *launch = command.op_as_KernelLaunch())
    return {toString(program.kernels()->Get(launch->kernel())->name()),
            "kernel", args.str()};
  if (const fb::Gemm *gemm = command.op_as_Gemm()) {
    args.number("m", gemm->m())
        .number("n", gemm->n())
        .number("k", gemm->k())
        .number("batch", gemm->batch())
        .text("dtype", dtypeName(toDType(gemm->dtype())));
    return {"gemm", "gemm", args.str()};
  }
  if (std::optional<AttentionOperands> attention = attentionOperands(command)) {
    const AttentionShape &s = attention->shape;
    args.number("batch", s.batch)
        .number("seq_q", s.seqQ)
        .number("seq_kv", s.seqKv)
        .number("heads", s.heads)
        .number("kv_heads", s.kvHeads)
        .number("head_dim", s.headDim)
        .flag("causal", s.causal)
        .text("dtype", dtypeName(s.dtype));
    const char *name = attention->backward ? "attention_grad" : "attention";
    return {name, "attention", args.str()};
  }
  if (const fb::LibraryCall *call = command.op_as_LibraryCall()) {
    // Verification has checked the call against its kernel's signature.
    const LibraryKernelSignature &kernel =
        *findLibraryKernel(toString(call->name()));
    for (uint32_t i = 0; i < sizeOf(call->params()); ++i)
      args.number(kernel.params[i], call->params()->Get(i));
    return {kernel.name, "library", args.str()};
  }
  if (const fb::Collective *collective = command.op_as_Collective())
    return collectiveLabel(program, *collective, args);
  if (const fb::Wait *wait = command.op_as_Wait()) {
    args.number("collective", wait->collective());
    return {"wait", "collective", args.str()};
  }
  const fb::Copy *copy = command.op_as_Copy();
  args.number("bytes", static_cast<int64_t>(copy->bytes()));
  return {"copy", "copy", args.str()};
}

TraceLabel graphLabel(const GraphRegion &region, bool capture) {
  return {region.name, "graph",
          TraceArgs()
              .number("first_command", region.first)
              .number("commands", region.count)
              .flag("capture", capture)
              .str()};
}

TraceLabel entryLabel(const fb::Entry &entry) {
  return {toString(entry.name()), "entry",
          TraceArgs().number("commands", sizeOf(entry.commands())).str()};
}

} // namespace megrt
