//===- MemoryPlan.cpp - each entry's memory plan, by megrt-plan-memory ---===//
//
// Writes an entry as the megrt dialect (its buffers, then its commands with
// their operands' memory effects), runs megrt-plan-memory on it, and reads
// the arena offsets and the plan's figures back into the entry.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"
#include "megc/Dialect/Megrt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

namespace megc {

namespace {

using mlir::NamedAttribute;
using mlir::Value;

/// One entry as a megrt.entry, and each buffer's declaration.
class EntryWriter {
public:
  EntryWriter(const ProgramDesc &program, const EntryDesc &entry,
              mlir::ModuleOp module)
      : program(program), entry(entry),
        builder(mlir::OpBuilder::atBlockEnd(module.getBody())),
        loc(builder.getUnknownLoc()) {}

  mlir::FailureOr<rt::EntryOp> write() {
    auto op = rt::EntryOp::create(builder, loc, builder.getStringAttr("entry"),
                                  nullptr, nullptr, nullptr, nullptr, nullptr);
    for (auto [index, output] : llvm::enumerate(entry.outputs))
      if (output.name == "loss")
        op.setLossOutputAttr(builder.getI64IntegerAttr(index));
    builder.setInsertionPointToStart(&op.getBody().emplaceBlock());
    for (auto [index, buffer] : llvm::enumerate(entry.buffers))
      if (failed(declare(index, buffer)))
        return mlir::failure();
    for (auto [index, command] : llvm::enumerate(entry.commands))
      if (failed(std::visit([&](const auto &c) { return add(index, c); },
                            command)))
        return mlir::failure();
    return op;
  }

  /// The declaration of each buffer, in the entry's order.
  std::vector<mlir::Operation *> declarations;

private:
  mlir::LogicalResult declare(size_t index, const BufferDesc &buffer) {
    auto type = rt::BufferType::get(builder.getContext(), buffer.type);
    mlir::Operation *op = nullptr;
    if (buffer.aliasOf >= 0) {
      if (static_cast<size_t>(buffer.aliasOf) >= index)
        return mlir::emitError(loc) << "buffer " << index << " views buffer "
                                    << buffer.aliasOf << ", declared after it";
      op = rt::ViewOp::create(builder, loc, type, values[buffer.aliasOf]);
    } else {
      auto position = static_cast<int64_t>(buffer.index);
      switch (buffer.kind) {
      case BufferKind::Arena:
        op = rt::ArenaOp::create(builder, loc, type, nullptr);
        break;
      case BufferKind::Parameter:
        op = rt::ParamOp::create(builder, loc, type, position);
        break;
      case BufferKind::Input:
        op = rt::InputOp::create(builder, loc, type, position);
        break;
      case BufferKind::Output:
        op = rt::OutputOp::create(builder, loc, type, position);
        break;
      }
    }
    declarations.push_back(op);
    values.push_back(op->getResult(0));
    return mlir::success();
  }

  NamedAttribute attr(llvm::StringRef name, int64_t value) {
    return builder.getNamedAttr(name, builder.getI64IntegerAttr(value));
  }
  void flag(llvm::SmallVectorImpl<NamedAttribute> &attrs, llvm::StringRef name,
            bool set) {
    if (set)
      attrs.push_back(builder.getNamedAttr(name, builder.getUnitAttr()));
  }
  /// A generic op: the ops' definitions verify it.
  mlir::Operation *create(llvm::StringRef name, mlir::ValueRange operands,
                          llvm::ArrayRef<NamedAttribute> attrs,
                          mlir::TypeRange results = {}) {
    mlir::OperationState state(loc, name);
    state.addOperands(operands);
    state.addAttributes(attrs);
    state.addTypes(results);
    return builder.create(state);
  }
  mlir::LogicalResult done(mlir::Operation *op) {
    return mlir::success(op != nullptr);
  }

  mlir::LogicalResult add(size_t, const LaunchCommand &launch) {
    llvm::SmallVector<Value> args;
    for (uint32_t arg : launch.args)
      args.push_back(values[arg]);
    return done(
        create(rt::LaunchOp::getOperationName(), args,
               {builder.getNamedAttr(
                   "kernel", mlir::FlatSymbolRefAttr::get(
                                 builder.getContext(),
                                 program.kernels[launch.kernel].name))}));
  }

  mlir::LogicalResult add(size_t, const GemmCommand &gemm) {
    llvm::SmallVector<Value> operands = {values[gemm.a], values[gemm.b],
                                         values[gemm.c]};
    if (gemm.bias >= 0)
      operands.push_back(values[gemm.bias]);
    llvm::SmallVector<NamedAttribute> attrs = {attr("m", gemm.m),
                                               attr("n", gemm.n),
                                               attr("k", gemm.k),
                                               attr("batch", gemm.batch),
                                               attr("stride_a", gemm.strideA),
                                               attr("stride_b", gemm.strideB),
                                               attr("stride_c", gemm.strideC)};
    flag(attrs, "trans_a", gemm.transA);
    flag(attrs, "trans_b", gemm.transB);
    flag(attrs, "gelu", gemm.geluEpilogue);
    flag(attrs, "accumulate", gemm.accumulate);
    return done(create(rt::GemmOp::getOperationName(), operands, attrs));
  }

  mlir::LogicalResult add(size_t, const CopyCommand &copy) {
    return done(create(rt::CopyOp::getOperationName(),
                       {values[copy.src], values[copy.dst]},
                       {attr("bytes", static_cast<int64_t>(copy.bytes))}));
  }

  mlir::LogicalResult add(size_t, const AttentionCommand &attention) {
    llvm::SmallVector<Value> operands = {
        values[attention.q], values[attention.k], values[attention.v]};
    if (attention.backward)
      operands.append({values[attention.out], values[attention.gradOut],
                       values[attention.gradQ], values[attention.gradK],
                       values[attention.gradV]});
    else
      operands.push_back(values[attention.out]);
    int32_t stats = attention.stats >= 0, positions = attention.positions >= 0;
    if (stats)
      operands.push_back(values[attention.stats]);
    if (positions)
      operands.push_back(values[attention.positions]);
    llvm::SmallVector<int32_t> segments(attention.backward ? 8 : 4, 1);
    segments.append({stats, positions});
    llvm::SmallVector<NamedAttribute> attrs = {
        attr("batch", attention.batch),
        attr("seq_q", attention.seqQ),
        attr("seq_kv", attention.seqKv),
        attr("heads", attention.heads),
        attr("kv_heads", attention.kvHeads),
        attr("head_dim", attention.headDim),
        attr("value_dim", attention.valueDim),
        builder.getNamedAttr("scale", builder.getF32FloatAttr(attention.scale)),
        builder.getNamedAttr("operandSegmentSizes",
                             builder.getDenseI32ArrayAttr(segments))};
    flag(attrs, "causal", attention.causal);
    return done(create(attention.backward
                           ? rt::AttentionGradOp::getOperationName()
                           : rt::AttentionOp::getOperationName(),
                       operands, attrs));
  }

  mlir::LogicalResult add(size_t, const LibraryCallCommand &call) {
    llvm::SmallVector<Value> operands;
    llvm::SmallVector<int64_t> slots;
    for (auto [slot, operand] : llvm::enumerate(call.operands))
      if (operand >= 0) {
        operands.push_back(values[operand]);
        slots.push_back(static_cast<int64_t>(slot));
      }
    return done(create(
        rt::LibraryCallOp::getOperationName(), operands,
        {builder.getNamedAttr("kernel", builder.getStringAttr(call.kernel)),
         builder.getNamedAttr("slots", builder.getDenseI64ArrayAttr(slots)),
         builder.getNamedAttr("params",
                              builder.getDenseI64ArrayAttr(call.params))}));
  }

  mlir::LogicalResult add(size_t index, const CollectiveCommand &collective) {
    const char *reduce =
        collective.reduce == CollectiveCommand::Reduce::Avg   ? "avg"
        : collective.reduce == CollectiveCommand::Reduce::Max ? "max"
                                                              : "sum";
    llvm::SmallVector<mlir::Type, 1> results;
    if (collective.async)
      results.push_back(rt::TokenType::get(builder.getContext()));
    mlir::Operation *op =
        create(rt::CollectiveOp::getOperationName(),
               {values[collective.src], values[collective.dst]},
               {builder.getNamedAttr(
                    "kind", builder.getStringAttr(
                                megrt::collectiveInfo(collective.kind).name)),
                attr("submesh", collective.submesh),
                attr("count", static_cast<int64_t>(collective.count)),
                builder.getNamedAttr("reduce", builder.getStringAttr(reduce)),
                builder.getNamedAttr(
                    "params", builder.getDenseI64ArrayAttr(collective.params))},
               results);
    if (collective.async)
      tokens[index] = op->getResult(0);
    return done(op);
  }

  mlir::LogicalResult add(size_t, const WaitCommand &wait) {
    Value token = tokens.lookup(wait.collective);
    if (!token)
      return mlir::emitError(loc) << "a wait for command " << wait.collective
                                  << ", which is no started collective";
    return done(create(rt::WaitOp::getOperationName(),
                       {token, values[wait.src], values[wait.dst]}, {}));
  }

  const ProgramDesc &program;
  const EntryDesc &entry;
  mlir::OpBuilder builder;
  mlir::Location loc;
  std::vector<Value> values;
  llvm::DenseMap<size_t, Value> tokens;
};

} // namespace

mlir::LogicalResult planMemory(ProgramDesc &program) {
  for (EntryDesc &entry : program.entries) {
    if (entry.buffers.empty()) {
      entry.plan = {};
      continue;
    }
    mlir::MLIRContext *context = entry.buffers.front().type.getContext();
    context->getOrLoadDialect<rt::MegrtDialect>();
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::ModuleOp::create(mlir::UnknownLoc::get(context));
    EntryWriter writer(program, entry, *module);
    mlir::FailureOr<rt::EntryOp> written = writer.write();
    if (failed(written))
      return mlir::failure();
    mlir::PassManager pm(context, mlir::ModuleOp::getOperationName());
    pm.addNestedPass<rt::EntryOp>(rt::createMegrtPlanMemory());
    if (failed(pm.run(*module)))
      return mlir::failure();
    for (auto [buffer, op] : llvm::zip(entry.buffers, writer.declarations))
      if (auto arena = llvm::dyn_cast<rt::ArenaOp>(op))
        if (std::optional<uint64_t> offset = arena.getOffset())
          buffer.offset = *offset;
    // Views share their storage's placement.
    for (BufferDesc &buffer : entry.buffers)
      if (buffer.aliasOf >= 0)
        buffer.offset = entry.buffers[buffer.aliasOf].offset;
    MemoryPlan &plan = entry.plan;
    plan = {};
    plan.arenaBytes = written->getArenaBytes().value_or(0);
    plan.peakBytes = written->getPeakBytes().value_or(0);
    plan.unplannedBytes = written->getUnplannedBytes().value_or(0);
    plan.liveAtLossBytes = written->getLiveAtLossBytes().value_or(0);
  }
  return mlir::success();
}

} // namespace megc
