//===- ProgramBuilder.h - meg entry functions to a program -----*- C++ -*-===//
//
// The state of buildProgram (megc/Compiler/Program.h) while it walks a
// module, shared by the files that each do one of its jobs:
//   BuildProgram.cpp       the walk: entries, their buffers, op by op
//   ProgramDescription.cpp parameters, mesh and learning-rate schedule
//   IndexBounds.cpp        the table each integer input indexes
//   LibraryCalls.cpp       GEMMs, attention, collectives and the
//                          library kernels' patterns: the runtime's own
//                          commands
//   PlaceKernels.cpp       generated kernels, de-duplicated
//   InPlaceUpdates.cpp     which buffer a result is computed into
//   EntryFlops.cpp         the flops an entry's commands do
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_COMPILER_PROGRAMBUILDER_H
#define MEGC_LIB_COMPILER_PROGRAMBUILDER_H

#include "megc/Compiler/Program.h"
#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <string>

namespace megc {

/// The parameter read `value` is: a meg.param_ref, or a graph region's
/// argument bound to one.
mlir::meg::ParamRefOp paramRefOf(mlir::Value value);

using namespace mlir;
using namespace mlir::meg;

class ProgramBuilder {
public:
  ProgramBuilder(ModuleOp module, const CompileOptions &options)
      : module(module), options(options), builder(module.getContext()) {}

  mlir::FailureOr<ProgramDesc> build();

  /// For the library patterns (LibraryCalls.cpp): the buffer of an operand
  /// of a call (-1 for a null Value: an optional operand left out), and the
  /// buffer its result is computed into.
  FailureOr<int32_t> callOperand(Value value);
  int32_t callResult(Value result);

private:
  /// The parameters, with their sharding.
  LogicalResult describeParameters();
  /// The schedule's state parameters, as meg-optimizer recorded them.
  LogicalResult describeLrSchedule();
  LogicalResult describeMesh();
  void describePipeline();
  FailureOr<uint32_t> submeshIndex(Operation *user, FlatSymbolRefAttr mesh,
                                   ArrayAttr axes);
  LogicalResult placeCollective(Operation *op);
  LogicalResult placeTransfer(Operation *op);
  LogicalResult buildEntry(func::FuncOp func);
  void indexBoundOf(Value input, TensorSpec &spec);
  FailureOr<uint32_t> bufferFor(Value value);
  uint32_t addBuffer(BufferKind kind, uint32_t index, RankedTensorType type,
                     int32_t aliasOf = -1);
  LogicalResult placeOp(Operation *op);
  LogicalResult placeOpCommands(Operation *op);
  LogicalResult placeKernel(Operation *op);
  std::optional<uint32_t> storedParameter(Operation *op, Value result);
  uint32_t resultBuffer(Value result);
  bool readAfter(StringRef param, Operation *op);
  LogicalResult placeGraphRegion(GraphRegionOp region);
  LogicalResult placeAttention(Operation *op);
  /// `op` as a call of a runtime library kernel when a library pattern
  /// matches it; std::nullopt when none does.
  std::optional<LogicalResult> placeLibraryCall(Operation *op);
  LogicalResult placeLinear(LinearOp op);
  bool accumulateInto(Operation *product, GemmCommand &gemm);
  LogicalResult placeMatmul(MatmulOp op);
  uint32_t kernelIndex(func::FuncOp kernel, StringRef opName);

  ModuleOp module;
  const CompileOptions &options;
  OpBuilder builder;
  ProgramDesc program;
  llvm::StringMap<uint32_t> paramIndex;
  /// The kernels generated so far, by the structural hash of their
  /// functions (kernelIndex): each bucket's functions and their indices.
  llvm::DenseMap<unsigned, SmallVector<std::pair<func::FuncOp, uint32_t>, 1>>
      kernelsByHash;
  EntryDesc *entry = nullptr;
  llvm::DenseMap<Value, uint32_t> buffers;
  /// Ops already carried out by another command (an epilogue).
  llvm::DenseSet<Operation *> absorbed;
  /// The program's mesh, and the submesh every entry input is split over
  /// (data parallelism under meg-fsdp); -1 without.
  MeshOp mesh;
  int32_t inputSplit = -1;
  /// An async collective's future: its command index and buffers.
  llvm::DenseMap<Value, WaitCommand> started;
};

} // namespace megc

#endif // MEGC_LIB_COMPILER_PROGRAMBUILDER_H
