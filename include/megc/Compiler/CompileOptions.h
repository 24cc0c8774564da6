//===- CompileOptions.h - the typed options of one compilation -*- C++ -*-===//
//
// What `megc model.mlir` and megc.compile are asked to do, parsed once from
// the text the user typed into the typed structure every pipeline is built
// from.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_COMPILER_COMPILEOPTIONS_H
#define MEGC_COMPILER_COMPILEOPTIONS_H

#include "megc/Target/CudaArch.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace megc {

/// What `megc --emit` asks for: the artifact, the IR after the front end,
/// the program as text, the kernel functions (the input of the back-end
/// pipelines, for megc-opt), the CPU module's optimised LLVM IR, the PTX,
/// the GPU kernels as the NVVM conversion receives them, or those kernels
/// as a shared object for the GPU emulator (tests).
enum class Emit {
  Artifact,
  Mlir,
  Megrt,
  MegrtIr,
  Kernels,
  Llvm,
  Ptx,
  Gpu,
  CudaEmulation
};

/// `--cuda-graphs`: no graph regions, one per step, or one per layer.
enum class CudaGraphScope { None, Step, Layer };

/// The CPU code's instruction set: baseline x86-64 (runs on any x86-64
/// host) or also the extensions of this host that megrt can check
/// (megrt/CpuFeatures.h; the runtime refuses it on a CPU without them).
enum class CpuIsa { X86_64, Native };

/// `--recompute`: what every transformer layer recomputes in the backward.
enum class Recompute { None, Selective, Full };

/// The options of one compilation, typed; every pipeline is built from it.
struct CompileOptions {
  bool cpu = true;
  bool cuda = false;
  CudaArch cudaArch;
  CpuIsa cpuIsa = CpuIsa::X86_64;
  Emit emit = Emit::Artifact;
  bool fuse = true;
  bool fuseRope = true;
  /// Pipeline transfers start as soon as the values they send exist
  /// (meg-async-collectives' early-transfers); `--no-early-sends` off.
  bool earlySends = true;
  CudaGraphScope cudaGraphs = CudaGraphScope::None;
  bool shareIoBuffers = false;
  /// `--capture-collectives`: collectives run inside graph regions (NCCL
  /// captured into the CUDA graph) instead of splitting them.
  bool captureCollectives = false;
  Recompute recompute = Recompute::None;
  /// `--loss-chunks`: chunks of tokens the final norm, LM head and
  /// cross-entropy of the loss run over (1: one).
  int64_t lossChunks = 1;
  /// `--memory-budget`: bytes per rank that the plan of every training
  /// entry (arena plus parameters and state) must fit in; 0: none.
  uint64_t memoryBudget = 0;
  /// Under a memory budget, the steps of meg-remat's ladder taken at least,
  /// per pipeline rank (a program without a pipeline: the first): set by
  /// the driver (runFrontEnd) when a rank's compiled plan needs more than
  /// the pass estimated, never by a flag.
  std::vector<unsigned> rematMinSteps;

  /// CUDA code is generated: for the cuda target or for --emit=ptx, gpu
  /// and cuda-emulation.
  bool generatesCuda() const {
    return cuda || emit == Emit::Ptx || emit == Emit::Gpu ||
           emit == Emit::CudaEmulation;
  }
};

/// The C++ type of each kind of CompileFlags.def.
using CompileFlagString = std::string;
using CompileFlagBool = bool;
using CompileFlagInt = int64_t;
using CompileFlagList = std::vector<std::string>;

/// The compile options as the user spells them: megc's flags and
/// megc.compile's keywords, one field each, as CompileFlags.def declares
/// them (`targets`: cpu and/or cuda, empty meaning cpu; `memoryBudget`: a
/// size such as 40GiB, 512MB or 1000000 bytes, empty for none).
struct CompileFlags {
#define MEGC_COMPILE_FLAG(field, kind, flag, python, value, help)              \
  CompileFlag##kind field = value;
#include "megc/Compiler/CompileFlags.def"
};

/// A size in bytes as a user writes it: a number with an optional unit
/// (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of
/// 1024); the error names `flag`.
llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text,
                                       llvm::StringRef flag);

/// Parses and checks every flag before any work; the error names the flag
/// as the driver spells it (e.g. "unknown --target 'tpu'; expected cpu or
/// cuda").
llvm::Expected<CompileOptions> parseCompileFlags(const CompileFlags &flags);

} // namespace megc

#endif // MEGC_COMPILER_COMPILEOPTIONS_H
