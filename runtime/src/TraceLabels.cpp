// What the trace shows for each command, graph region and entry run, the
// same on every device.
#include "TraceLabels.h"

#include "AttentionCommand.h"

#include "FbTypes.h"

namespace megrt {

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
