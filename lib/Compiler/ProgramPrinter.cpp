//===- ProgramPrinter.cpp - the program as readable text ---------------===//
//
// Prints what the artifact will hold, one line per buffer and command, for
// `megc --emit=megrt` and the compiler's tests.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"
#include "megrt/LibraryKernels.h"

#include "llvm/Support/raw_ostream.h"

namespace megc {

namespace {

const char *kindName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Arena:
    return "arena";
  case BufferKind::Parameter:
    return "param";
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  }
  return "?";
}

void printBuffers(llvm::raw_ostream &os, const std::vector<uint32_t> &ids) {
  llvm::interleaveComma(ids, os, [&](uint32_t id) { os << "%b" << id; });
}

/// `#meg.kernel_strategy<...>` as the IR spells it.
void printStrategy(llvm::raw_ostream &os, const KernelStrategyDesc &strategy) {
  os << "#meg.kernel_strategy<" << strategy.kind << ", domain = [";
  llvm::interleaveComma(strategy.domain, os);
  os << "], tile = [";
  llvm::interleaveComma(strategy.tile, os);
  os << "], vector = " << strategy.vectorWidth << ">";
}

/// `  <target> <entry> grid X[xYxZ] [block XxYxZ] (%a0, scratch+256)`: %aN
/// is the kernel's argument N.
void printDispatch(llvm::raw_ostream &os, llvm::StringRef target,
                   const DispatchDesc &dispatch) {
  auto dims = [&](const std::array<uint32_t, 3> &d) {
    os << d[0] << "x" << d[1] << "x" << d[2];
  };
  os << "  " << target << " " << dispatch.entry << " grid ";
  if (target == "cpu") {
    os << dispatch.grid[0];
  } else {
    dims(dispatch.grid);
    os << " block ";
    dims(dispatch.block);
  }
  if (dispatch.sharedBytes)
    os << " shared " << dispatch.sharedBytes;
  os << " (";
  llvm::interleaveComma(dispatch.args, os, [&](const DispatchArgDesc &arg) {
    if (arg.scratch)
      os << "scratch+" << arg.value;
    else
      os << "%a" << arg.value;
  });
  os << ")\n";
}

/// `  <target> strategy #meg.kernel_strategy<...> scratch N` and the
/// target's dispatches.
void printCode(llvm::raw_ostream &os, llvm::StringRef target,
               const KernelCodeDesc &code) {
  os << "  " << target << " strategy ";
  printStrategy(os, code.strategy);
  os << " scratch " << code.scratchBytes << "\n";
  for (const DispatchDesc &dispatch : code.dispatches)
    printDispatch(os, target, dispatch);
}

/// Prints submesh `index` as `@mesh[axis, ...]`.
void printSubmesh(llvm::raw_ostream &os, const ProgramDesc &program,
                  uint32_t index) {
  os << "@" << (program.mesh ? program.mesh->name : "?") << "[";
  llvm::interleaveComma(program.submeshes[index], os);
  os << "]";
}

/// "library embedding_grad(grad %b3, ids %b0 -> table %b7) tokens 16 vocab
/// 32 dim 8": the operands the call passes and the parameters, named by the
/// kernel's signature.
void printLibraryCall(llvm::raw_ostream &os, const LibraryCallCommand &call) {
  const megrt::LibraryKernelSignature *kernel =
      megrt::findLibraryKernel(call.kernel);
  os << "library " << call.kernel << "(";
  bool first = true, writes = false;
  for (auto [index, operand] : llvm::enumerate(call.operands)) {
    if (operand < 0)
      continue;
    bool written = kernel->operands[index].writes;
    os << (written && !writes ? " -> "
           : first            ? ""
                              : ", ")
       << kernel->operands[index].name << " %b" << operand;
    writes = writes || written;
    first = false;
  }
  os << ")";
  for (auto [index, param] : llvm::enumerate(call.params))
    os << " " << kernel->params[index] << " " << param;
}

} // namespace

void printProgram(const ProgramDesc &program, const CpuModuleDesc *cpu,
                  const CudaModuleDesc *cuda, llvm::raw_ostream &os) {
  for (auto [index, kernel] : llvm::enumerate(program.kernels)) {
    os << "kernel " << index << " " << kernel.name << " args " << kernel.numArgs
       << "\n";
    if (cpu)
      printCode(os, "cpu", cpu->kernels[index]);
    if (cuda)
      printCode(os, "cuda", cuda->kernels[index]);
  }
  if (program.mesh) {
    os << "mesh @" << program.mesh->name << " [";
    llvm::interleaveComma(program.mesh->axes, os, [&](const auto &axis) {
      os << axis.first << " = " << axis.second;
    });
    os << "]\n";
  }
  for (auto [index, axes] : llvm::enumerate(program.submeshes)) {
    os << "submesh " << index << " ";
    printSubmesh(os, program, index);
    os << "\n";
  }
  for (const ParameterDesc &param : program.parameters) {
    if (param.shardSubmesh < 0)
      continue;
    os << "sharded " << param.name << " : " << param.type << " of [";
    llvm::interleaveComma(param.fullShape, os);
    os << "] over ";
    printSubmesh(os, program, param.shardSubmesh);
    if (param.shardDim >= 0)
      os << " dim " << param.shardDim;
    if (param.blockSubmesh >= 0) {
      os << " blocks over ";
      printSubmesh(os, program, param.blockSubmesh);
    }
    os << "\n";
  }
  for (const EntryDesc &entry : program.entries) {
    os << "entry " << entry.name << " arena " << entry.plan.arenaBytes
       << " peak " << entry.plan.peakBytes << " unplanned "
       << entry.plan.unplannedBytes << "\n";
    for (auto [index, buffer] : llvm::enumerate(entry.buffers)) {
      os << "  %b" << index << " = " << kindName(buffer.kind);
      if (buffer.kind != BufferKind::Arena)
        os << " " << buffer.index;
      os << " offset " << buffer.offset << " : " << buffer.type;
      if (buffer.aliasOf >= 0)
        os << " view of %b" << buffer.aliasOf;
      os << "\n";
    }
    for (const GraphRegionDesc &graph : entry.graphs)
      os << "  graph \"" << graph.name << "\" commands " << graph.first << ".."
         << graph.first + graph.count << (graph.shareIo ? " share_io" : "")
         << (graph.forwardOnly ? " forward_only" : "") << "\n";
    for (const Command &command : entry.commands) {
      os << "  ";
      if (auto *launch = std::get_if<LaunchCommand>(&command)) {
        os << "launch " << program.kernels[launch->kernel].name << "(";
        printBuffers(os, launch->args);
        os << ")";
      } else if (auto *gemm = std::get_if<GemmCommand>(&command)) {
        os << "gemm %b" << gemm->c << (gemm->accumulate ? " += %b" : " = %b")
           << gemm->a << (gemm->transA ? "^T" : "") << " x %b" << gemm->b
           << (gemm->transB ? "^T" : "");
        if (gemm->bias >= 0)
          os << " + %b" << gemm->bias;
        os << " m " << gemm->m << " n " << gemm->n << " k " << gemm->k
           << " batch " << gemm->batch
           << (gemm->geluEpilogue ? " epilogue gelu_tanh" : "");
      } else if (auto *a = std::get_if<AttentionCommand>(&command)) {
        if (a->backward)
          os << "attention_grad %b" << a->gradQ << ", %b" << a->gradK << ", %b"
             << a->gradV << " = (%b" << a->gradOut << ", %b" << a->q << ", %b"
             << a->k << ", %b" << a->v << ", %b" << a->out
             << (a->stats >= 0 ? ", stats %b" + std::to_string(a->stats) : "")
             << ")";
        else
          os << "attention %b" << a->out
             << (a->stats >= 0 ? ", stats %b" + std::to_string(a->stats) : "")
             << " = (%b" << a->q << ", %b" << a->k << ", %b" << a->v << ")";
        if (a->positions >= 0)
          os << " positions %b" << a->positions;
        os << " b " << a->batch << " sq " << a->seqQ << " skv " << a->seqKv
           << " h " << a->heads << " hkv " << a->kvHeads << " d " << a->headDim
           << " dv " << a->valueDim << (a->causal ? " causal" : "") << " scale "
           << a->scale;
      } else if (auto *call = std::get_if<LibraryCallCommand>(&command)) {
        printLibraryCall(os, *call);
      } else if (auto *c = std::get_if<CollectiveCommand>(&command)) {
        const megrt::CollectiveInfo &info = megrt::collectiveInfo(c->kind);
        os << info.name << (c->async ? "_start" : "") << " %b" << c->dst
           << " <- %b" << c->src << " over ";
        printSubmesh(os, program, c->submesh);
        os << " count " << c->count;
        for (size_t p = 0; p < c->params.size(); ++p)
          os << (p ? ", " : " params ") << c->params[p];
        if (info.reduces)
          os << (c->reduce == CollectiveCommand::Reduce::Avg   ? " avg"
                 : c->reduce == CollectiveCommand::Reduce::Max ? " max"
                                                               : " sum");
      } else if (auto *wait = std::get_if<WaitCommand>(&command)) {
        os << "wait command " << wait->collective << " (%b" << wait->dst << ")";
      } else {
        const auto &copy = std::get<CopyCommand>(command);
        os << "copy %b" << copy.dst << " <- %b" << copy.src << " bytes "
           << copy.bytes;
      }
      os << "\n";
    }
  }
}

} // namespace megc
