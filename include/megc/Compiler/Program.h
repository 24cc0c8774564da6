//===- Program.h - the executable program before serialization -*- C++ -*-===//
//
// What the compiler hands to the artifact writer: per entry point, its
// named inputs and outputs, the buffers (arena slots, parameters, inputs,
// outputs) and the command list; plus the kernels they launch.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_COMPILER_PROGRAM_H
#define MEGC_COMPILER_PROGRAM_H

#include "megc/Compiler/CompileOptions.h"
#include "megrt/Collectives.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace megc {

enum class BufferKind { Arena, Parameter, Input, Output };

struct BufferDesc {
  BufferKind kind = BufferKind::Arena;
  /// Parameter, input or output index for those kinds.
  uint32_t index = 0;
  /// Bytes from the start of the arena (or of the tensor for the others).
  uint64_t offset = 0;
  mlir::RankedTensorType type;
  /// For a view (reshape), the buffer whose storage it shares.
  int32_t aliasOf = -1;

  uint64_t sizeBytes() const;
};

struct LaunchCommand {
  uint32_t kernel;
  std::vector<uint32_t> args; // inputs then outputs
  /// How many of args are the kernel's inputs (read); the rest are its
  /// outputs (written).
  uint32_t numInputs = 0;
  /// The inputs (indices into args) the kernel overwrites in place.
  std::vector<int64_t> updates;
};

struct GemmCommand {
  uint32_t a, b, c;
  int32_t bias = -1;
  int64_t m, n, k, batch = 1, strideA = 0, strideB = 0, strideC = 0;
  bool transA = false, transB = false;
  /// Applies tanh-approximated GELU to C (after the bias).
  bool geluEpilogue = false;
  /// C += A B (beta 1): the sum of a value nothing else reads and the
  /// product, computed in the value's buffer.
  bool accumulate = false;
};

struct CopyCommand {
  uint32_t src, dst;
  uint64_t bytes;
};

/// Fused attention (runtime/schema/megc.fbs, Attention / AttentionGrad):
/// forward reads q, k, v and writes out; backward also reads gradOut and
/// writes gradQ, gradK, gradV.
struct AttentionCommand {
  bool backward = false;
  uint32_t q, k, v, out;
  uint32_t gradOut = 0, gradQ = 0, gradK = 0, gradV = 0;
  /// The softmax statistics ([batch, heads, seqQ] f32 log-sum-exp) that the
  /// forward writes or the backward reads, or -1.
  int32_t stats = -1;
  /// Each query's position in the key sequence ([seqQ] i32; a causal
  /// query sees the keys up to it), or -1: query i at i + seqKv - seqQ.
  int32_t positions = -1;
  int64_t batch, seqQ, seqKv, heads, kvHeads, headDim, valueDim;
  bool causal;
  float scale;
};

/// A call of the runtime's library kernel `kernel` (runtime/schema/megc.fbs,
/// LibraryCall; megrt/LibraryKernels.def lists the kernels with their
/// operands and parameters): per operand its buffer, or -1 for an optional
/// one left out; the integer parameters in the kernel's order.
struct LibraryCallCommand {
  std::string kernel;
  std::vector<int32_t> operands;
  std::vector<int64_t> params;
};

/// A collective over the registered submesh ProgramDesc::submeshes[submesh]
/// (runtime/schema/megc.fbs, Collective): `count` elements per rank piece;
/// its kind is a line of megrt/Collectives.def, which says what src and dst
/// hold.
struct CollectiveCommand {
  using Kind = megrt::CollectiveId;
  Kind kind;
  uint32_t submesh;
  /// Of ReduceScatter and AllReduce.
  enum class Reduce { Sum, Avg, Max } reduce = Reduce::Sum;
  uint32_t src, dst;
  uint64_t count;
  /// Started here, completed by a later WaitCommand.
  bool async = false;
  /// Its integer parameters (a shift's offset).
  std::vector<int64_t> params;
};
/// Completes the async collective at command index `collective`; src and
/// dst repeat its buffers so that liveness keeps them until here.
struct WaitCommand {
  uint32_t collective;
  uint32_t src, dst;
};
using Command =
    std::variant<LaunchCommand, GemmCommand, CopyCommand, AttentionCommand,
                 LibraryCallCommand, CollectiveCommand, WaitCommand>;

struct TensorSpec {
  std::string name;
  mlir::RankedTensorType type;
  /// For a data-parallel input: the submesh over whose ranks dim 0 of the
  /// global tensor is split.
  int32_t split = -1;
  /// For an integer input used as an index: every value must lie in
  /// [0, indexBound) (0: not an index); indexUse says what it indexes.
  int64_t indexBound = 0;
  std::string indexUse;
  /// A value allowed besides [0, indexBound): the label every loss that
  /// reads the input ignores.
  std::optional<int64_t> indexIgnore;
};

struct MemoryPlan {
  uint64_t arenaBytes = 0;
  /// Largest sum of simultaneously live intermediates (a lower bound).
  uint64_t peakBytes = 0;
  /// Sum of all intermediates: what the arena would take without reuse.
  uint64_t unplannedBytes = 0;
  /// Intermediates live when the output named `loss` is first written (0
  /// without one): in a step of one micro-batch, what its forward keeps for the
  /// backward, which the planner multiplies by a pipeline stage's
  /// micro-batches in flight.
  uint64_t liveAtLossBytes = 0;
};

/// Commands [first, first + count) captured as one CUDA graph.
struct GraphRegionDesc {
  std::string name;
  uint32_t first = 0, count = 0;
  bool shareIo = false, forwardOnly = false;
};

struct EntryDesc {
  std::string name;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<BufferDesc> buffers;
  std::vector<Command> commands;
  MemoryPlan plan;
  std::vector<GraphRegionDesc> graphs;

  /// A pipeline stage's program: run by the ranks at index pipelineRank of
  /// the group of ProgramDesc::submeshes[stageSubmesh] (-1: every rank).
  int32_t stageSubmesh = -1, pipelineRank = -1;

  /// Per command: whether it recomputes an activation (meg.recomputed).
  std::vector<bool> recomputed;
  /// Per command of a pipeline rank's program: the kind of schedule pass
  /// it runs in (meg.pipeline_pass), which `megc plan` times the passes by.
  enum class PassKind : int8_t { None = -1, Forward, Backward, Weight };
  std::vector<PassKind> passKind;

  /// The floating-point operations of its GEMMs and attention (the
  /// artifact's Entry.flops), or of those that recompute activations.
  uint64_t flops(bool onlyRecomputed = false) const;
};

/// One pointer passed to a dispatch: the kernel's argument `value`, or
/// (scratch) the kernel's scratch area plus `value` bytes.
struct DispatchArgDesc {
  bool scratch = false;
  uint64_t value = 0;
};

/// One dispatch of a kernel's code (runtime/schema/megc.fbs, Dispatch): a
/// grid of workgroups running `entry`.
struct DispatchDesc {
  std::string entry;
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t sharedBytes = 0;
  std::vector<DispatchArgDesc> args;
};

/// The kernel_strategy a kernel's code realises (megrt's KernelStrategy).
struct KernelStrategyDesc {
  std::string kind = "serial";
  std::vector<int64_t> domain, tile;
  uint32_t vectorWidth = 1;
};

/// A kernel's code for one target, as its code generator returns it.
struct KernelCodeDesc {
  KernelStrategyDesc strategy;
  std::vector<DispatchDesc> dispatches;
  uint64_t scratchBytes = 0;
};

struct KernelDesc {
  std::string name;
  uint32_t numArgs;
};

struct ParameterDesc {
  std::string name;
  mlir::RankedTensorType type;
  bool trainable;
  std::string initKind;
  double initScale;
  /// Training state (optimizer moments, step count).
  bool state = false;
  /// For initKind "copy": the parameter this one copies.
  std::string initSource;
  /// Other names checkpoints hold the parameter under (meg.param aliases).
  std::vector<std::string> aliases;
  /// The checkpoint tensors of its slices along dim 0 (meg.param parts).
  std::vector<std::string> parts;
  /// Never negative (meg.non_negative): a second moment, a step count.
  bool nonNegative = false;
  /// A sharded parameter: the submesh it is split over and the shape of
  /// the whole tensor; its type is this rank's 1-D piece, or with
  /// shardDim >= 0 its block along that dimension.
  int32_t shardSubmesh = -1;
  std::vector<int64_t> fullShape;
  int64_t shardDim = -1;
  /// With shardDim: the submesh whose group cuts the blocks, when the
  /// pieces over shardSubmesh split this rank's block; -1 otherwise.
  int32_t blockSubmesh = -1;
  /// Under a pipeline: the rank of the group of pipelineSubmesh whose
  /// stage updates the parameter (the others' copies go stale); -1 when
  /// every rank holds its current value.
  int32_t pipelineSubmesh = -1, pipelineOwner = -1;
};

/// The learning-rate schedule (#meg.lr_schedule with the optimizer's lr as
/// maximum) and the state parameters it reads and writes; kind and
/// wsdStyle are the dialect's LrScheduleKind and WsdDecayStyle values.
struct LrScheduleDesc {
  uint32_t kind;
  double maxLr, minLr, initLr;
  int64_t warmup, decay, wsdDecay;
  uint32_t wsdStyle;
  uint32_t lrParameter, stepParameter;
};

struct MeshDesc {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
};

struct ProgramDesc {
  /// The mesh (absent: one rank) and the registered submeshes, each a list
  /// of its axes.
  std::optional<MeshDesc> mesh;
  std::vector<std::vector<std::string>> submeshes;
  std::vector<ParameterDesc> parameters;
  /// meg.hf_config of the module, or empty.
  std::string hfConfig;
  std::optional<LrScheduleDesc> lrSchedule;
  /// megc --memory-budget (bytes per rank; 0: none).
  uint64_t memoryBudget = 0;
  std::vector<EntryDesc> entries;
  std::vector<KernelDesc> kernels;
  /// A pipeline's ranks, stages per rank, micro-batches of the training
  /// step and schedule (1f1b, interleaved, zb-h1), as the module's
  /// meg.pipeline gives them; the planner plays the schedule out.
  struct Pipeline {
    int32_t ranks = 1, chunks = 1, microBatches = 1;
    std::string schedule;
  };
  std::optional<Pipeline> pipeline;
  /// Bytes per rank of the parameters and training state; of a pipeline,
  /// what rank `pipelineRank` of its group holds (its stages' and the
  /// shared ones; -1: all).
  uint64_t stateBytes(int32_t pipelineRank = -1) const;
  /// The kernels as tensor functions (one `func.func` per KernelDesc, same
  /// name), ready for the target code generators.
  mlir::OwningOpRef<mlir::ModuleOp> kernelModule;
};

/// Turns every public function of `module` (calls inlined, canonical) into
/// an entry: matrix products become GEMM commands, reshapes views, and each
/// other op a kernel (identical kernels shared). Diagnoses what it cannot
/// place.
mlir::FailureOr<ProgramDesc> buildProgram(mlir::ModuleOp module,
                                          const CompileOptions &options);

/// An entry written as the megrt dialect, and the op declaring each of its
/// buffers (in the entry's order).
struct MegrtEntry {
  /// The megrt.entry (megc/Dialect/Megrt/IR/MegrtDialect.h).
  mlir::Operation *op;
  std::vector<mlir::Operation *> declarations;
};

/// Appends `entry` to `module` as a megrt.entry named `name` (its buffers,
/// then one op per command).
mlir::FailureOr<MegrtEntry> writeMegrtEntry(const ProgramDesc &program,
                                            const EntryDesc &entry,
                                            mlir::ModuleOp module,
                                            llvm::StringRef name);

/// Every entry of the program as a megrt.entry of one module (a pipeline
/// rank's named `<entry>_rank<N>`), for `megc --emit=megrt-ir`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
programToMegrt(const ProgramDesc &program, mlir::MLIRContext *context);

/// Assigns every entry's arena offsets from liveness (megrt-plan-memory on
/// the entry as the megrt dialect): buffers whose lifetimes do not overlap
/// share memory; fills each entry's plan.
mlir::LogicalResult planMemory(ProgramDesc &program);

/// The CPU kernels as a linked shared object, the instruction-set
/// extensions it uses beyond baseline x86-64, and each kernel's code (in
/// the order of ProgramDesc::kernels).
struct CpuModuleDesc {
  std::string sharedObject;
  std::vector<std::string> features;
  std::vector<KernelCodeDesc> kernels;
  /// The optimised LLVM IR the object was made from, with --emit=llvm only.
  std::string llvmIr;
};

/// Compiles the kernel module for the CPU the options name.
mlir::FailureOr<CpuModuleDesc> compileCpuKernels(const ProgramDesc &program,
                                                 const CompileOptions &options);

/// GPU code of the kernels: one PTX module, its cubin when the toolkit's
/// ptxas is installed, and each kernel's code (in the order of
/// ProgramDesc::kernels).
struct CudaModuleDesc {
  std::string arch, ptx, cubin;
  std::vector<KernelCodeDesc> kernels;
};

/// Compiles the kernel module to PTX for options.cudaArch through NVVM and
/// assembles it with ptxas (a missing ptxas leaves the cubin empty and
/// warns).
mlir::FailureOr<CudaModuleDesc>
compileCudaKernels(const ProgramDesc &program, const CompileOptions &options);

/// The kernels mapped to the GPU for options.cudaArch: each kernel's launch
/// table, and the outlined kernels gathered into one gpu.module (the
/// `device` module), with `prepare` as the NVVM conversion receives them
/// (buildGpuDevicePreparation: `megc --emit=gpu`, the GPU emulation).
struct CudaKernelMapping {
  mlir::OwningOpRef<mlir::ModuleOp> device;
  std::vector<KernelCodeDesc> kernels;
};
mlir::FailureOr<CudaKernelMapping> mapCudaKernels(const ProgramDesc &program,
                                                  const CompileOptions &options,
                                                  bool prepare);

/// The prepared device module of mapCudaKernels lowered for the GPU
/// emulator (runtime/emulator) and linked into a shared object of its
/// interface (megemu/Abi.h): `megc --emit=cuda-emulation`, for tests that
/// run the CUDA kernels without a GPU.
mlir::FailureOr<std::string> compileCudaEmulation(mlir::ModuleOp device);

/// Prints the program as text, one line per kernel (with its code for each
/// target that has one), buffer and command (`megc --emit=megrt`).
void printProgram(const ProgramDesc &program, const CpuModuleDesc *cpu,
                  const CudaModuleDesc *cuda, llvm::raw_ostream &os);

/// Serializes the program, the CPU module (if not null) and the CUDA module
/// (if not null) in the artifact format of runtime/schema/megc.fbs.
std::string serializeProgram(const ProgramDesc &program,
                             const CpuModuleDesc *cpu,
                             const CudaModuleDesc *cuda);

} // namespace megc

#endif // MEGC_COMPILER_PROGRAM_H
