//===- ProgramToMegrt.cpp - the program's entries as the megrt dialect ---===//
//
// Writes each entry of a program as a megrt.entry: its buffers declared
// first, then one op per command, so that passes over the megrt dialect
// (the memory plan) and `megc --emit=megrt-ir` see the program as IR.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"
#include "megc/Dialect/Megrt/IR/MegrtDialect.h"

#include "mlir/IR/Builders.h"

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

  mlir::FailureOr<rt::EntryOp> write(llvm::StringRef name) {
    auto op = rt::EntryOp::create(builder, loc, builder.getStringAttr(name),
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
    auto inputs = static_cast<int32_t>(launch.numInputs);
    llvm::SmallVector<NamedAttribute> attrs = {
        builder.getNamedAttr(
            "kernel",
            mlir::FlatSymbolRefAttr::get(builder.getContext(),
                                         program.kernels[launch.kernel].name)),
        builder.getNamedAttr(
            "operandSegmentSizes",
            builder.getDenseI32ArrayAttr(
                {inputs, static_cast<int32_t>(args.size()) - inputs}))};
    if (!launch.updates.empty())
      attrs.push_back(builder.getNamedAttr(
          "updates", builder.getDenseI64ArrayAttr(launch.updates)));
    return done(create(rt::LaunchOp::getOperationName(), args, attrs));
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

mlir::FailureOr<MegrtEntry> writeMegrtEntry(const ProgramDesc &program,
                                            const EntryDesc &entry,
                                            mlir::ModuleOp module,
                                            llvm::StringRef name) {
  module.getContext()->getOrLoadDialect<rt::MegrtDialect>();
  EntryWriter writer(program, entry, module);
  mlir::FailureOr<rt::EntryOp> op = writer.write(name);
  if (failed(op))
    return mlir::failure();
  return MegrtEntry{*op, std::move(writer.declarations)};
}

mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
programToMegrt(const ProgramDesc &program, mlir::MLIRContext *context) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(context));
  for (const EntryDesc &entry : program.entries) {
    std::string name = entry.name;
    if (entry.pipelineRank >= 0)
      name += "_rank" + std::to_string(entry.pipelineRank);
    if (failed(writeMegrtEntry(program, entry, *module, name)))
      return mlir::failure();
  }
  return module;
}

} // namespace megc
