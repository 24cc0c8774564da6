//===- CompileOptions.cpp - parsing megc's compile flags ---------------===//
//
// The one place where the text of a compile flag is read.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/CompileOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

using namespace llvm;

namespace megc {

namespace {
Error optionError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}
} // namespace

Expected<uint64_t> parseByteSize(StringRef text, StringRef flag) {
  StringRef trimmed = text.trim();
  size_t digits = trimmed.find_first_not_of("0123456789.");
  StringRef number = trimmed.take_front(digits), unit = trimmed.drop_front(
                                                      number.size()).trim();
  static const std::pair<const char *, double> kUnits[] = {
      {"", 1},           {"B", 1},          {"KB", 1e3},
      {"MB", 1e6},       {"GB", 1e9},       {"TB", 1e12},
      {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}};
  const auto *scale = llvm::find_if(
      kUnits, [&](const auto &entry) { return unit == entry.first; });
  double value = 0;
  if (number.empty() || number.getAsDouble(value) ||
      scale == std::end(kUnits) || !(value > 0) ||
      value * scale->second >= 1.8e19)
    return optionError("invalid " + flag + " '" + text +
                       "'; expected a positive size such as 40GiB, 512MB or "
                       "1000000 (bytes; units B, KB, MB, GB, TB, KiB, MiB, "
                       "GiB, TiB)");
  return static_cast<uint64_t>(value * scale->second);
}

Expected<CompileOptions> parseCompileFlags(const CompileFlags &flags) {
  CompileOptions options;
  if (!flags.targets.empty()) {
    options.cpu = false;
    for (const std::string &target : flags.targets) {
      if (target == "cpu")
        options.cpu = true;
      else if (target == "cuda")
        options.cuda = true;
      else
        return optionError("unknown --target '" + target +
                           "'; expected cpu or cuda");
    }
  }
  static const std::pair<const char *, Emit> kEmits[] = {
      {"artifact", Emit::Artifact},
      {"mlir", Emit::Mlir},
      {"megrt", Emit::Megrt},
      {"megrt-ir", Emit::MegrtIr},
      {"kernels", Emit::Kernels},
      {"llvm", Emit::Llvm},
      {"ptx", Emit::Ptx},
      {"gpu", Emit::Gpu},
      {"cuda-emulation", Emit::CudaEmulation}};
  const auto *emit = llvm::find_if(
      kEmits, [&](const auto &entry) { return flags.emit == entry.first; });
  if (emit == std::end(kEmits))
    return optionError("unknown --emit '" + flags.emit +
                       "'; expected artifact, mlir, megrt, megrt-ir, kernels, "
                       "llvm, ptx, gpu or cuda-emulation");
  options.emit = emit->second;
  if (options.emit == Emit::Llvm && !options.cpu)
    return optionError("--emit=llvm prints the CPU code: it needs the cpu "
                       "target (--target=cpu or cpu,cuda)");
  Expected<CudaArch> arch = CudaArch::parse(flags.cudaArch, "--cuda-arch");
  if (!arch)
    return arch.takeError();
  options.cudaArch = *arch;
  if (flags.cpu == "x86-64")
    options.cpuIsa = CpuIsa::X86_64;
  else if (flags.cpu == "native")
    options.cpuIsa = CpuIsa::Native;
  else
    return optionError("unknown --cpu '" + flags.cpu +
                       "'; expected x86-64 (any x86-64 host) or native (also "
                       "this host's instruction-set extensions)");
  if (flags.cudaGraphs == "none")
    options.cudaGraphs = CudaGraphScope::None;
  else if (flags.cudaGraphs == "step")
    options.cudaGraphs = CudaGraphScope::Step;
  else if (flags.cudaGraphs == "layer")
    options.cudaGraphs = CudaGraphScope::Layer;
  else
    return optionError("unknown --cuda-graphs '" + flags.cudaGraphs +
                       "'; expected none, step or layer");
  if (flags.recompute == "none")
    options.recompute = Recompute::None;
  else if (flags.recompute == "selective")
    options.recompute = Recompute::Selective;
  else if (flags.recompute == "full")
    options.recompute = Recompute::Full;
  else
    return optionError("unknown --recompute '" + flags.recompute +
                       "'; expected none, selective or full");
  if (flags.lossChunks < 1)
    return optionError("--loss-chunks must be at least 1, got " +
                       Twine(flags.lossChunks));
  options.lossChunks = flags.lossChunks;
  if (!flags.memoryBudget.empty()) {
    Expected<uint64_t> budget =
        parseByteSize(flags.memoryBudget, "--memory-budget");
    if (!budget)
      return budget.takeError();
    options.memoryBudget = *budget;
  }
  options.fuse = !flags.noFuse;
  options.fuseRope = !flags.noFuseRope;
  options.earlySends = !flags.noEarlySends;
  options.shareIoBuffers = flags.shareIoBuffers;
  if (flags.captureCollectives && options.cudaGraphs == CudaGraphScope::None)
    return optionError("--capture-collectives captures collectives into CUDA "
                       "graph regions; it needs --cuda-graphs=step or layer");
  options.captureCollectives = flags.captureCollectives;
  return options;
}

} // namespace megc
