//===- MegrtDialect.cpp - the megrt dialect ----------------------------===//
//
// Registration, the verifiers and the memory effects that depend on an op's
// attributes (a GEMM that accumulates reads C; a library call's operands
// are read or written as its kernel's signature says).
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Megrt/IR/MegrtDialect.h"
#include "megrt/Collectives.h"
#include "megrt/LibraryKernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace megc::rt;

#include "megc/Dialect/Megrt/IR/MegrtDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "megc/Dialect/Megrt/IR/MegrtTypes.cpp.inc"

#define GET_OP_CLASSES
#include "megc/Dialect/Megrt/IR/MegrtOps.cpp.inc"

void MegrtDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "megc/Dialect/Megrt/IR/MegrtTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "megc/Dialect/Megrt/IR/MegrtOps.cpp.inc"
      >();
}

uint64_t BufferType::getBytes() const {
  RankedTensorType tensor = getTensor();
  return static_cast<uint64_t>(tensor.getNumElements()) *
         (tensor.getElementTypeBitWidth() / 8);
}

namespace {
uint64_t bytesOf(Type type) { return cast<BufferType>(type).getBytes(); }
} // namespace

LogicalResult EntryOp::verify() {
  // Buffers first, then commands: a buffer is declared before any command.
  bool commands = false;
  for (Operation &op : getBody().front()) {
    bool declaration = op.hasTrait<BufferDeclaration>();
    if (declaration && commands)
      return op.emitOpError()
             << "declares a buffer after the entry's first command";
    commands |= !declaration;
  }
  return success();
}

LogicalResult ViewOp::verify() {
  if (bytesOf(getBuffer().getType()) > bytesOf(getSource().getType()))
    return emitOpError() << "views " << bytesOf(getBuffer().getType())
                         << " bytes of a buffer of "
                         << bytesOf(getSource().getType());
  return success();
}

LogicalResult LaunchOp::verify() {
  std::optional<ArrayRef<int64_t>> updates = getUpdates();
  if (!updates)
    return success();
  int64_t previous = -1;
  for (int64_t input : *updates) {
    if (input <= previous || input >= static_cast<int64_t>(getInputs().size()))
      return emitOpError() << "updates input " << input << "; the "
                           << getInputs().size()
                           << " inputs are named once each, in order";
    previous = input;
  }
  return success();
}

void LaunchOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  ArrayRef<int64_t> updates = getUpdates().value_or(ArrayRef<int64_t>());
  for (auto [index, input] : llvm::enumerate(getInputsMutable())) {
    effects.emplace_back(MemoryEffects::Read::get(), &input);
    if (llvm::is_contained(updates, static_cast<int64_t>(index)))
      effects.emplace_back(MemoryEffects::Write::get(), &input);
  }
  for (OpOperand &output : getOutputsMutable())
    effects.emplace_back(MemoryEffects::Write::get(), &output);
}

void GemmOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), &getAMutable());
  effects.emplace_back(MemoryEffects::Read::get(), &getBMutable());
  if (getAccumulate())
    effects.emplace_back(MemoryEffects::Read::get(), &getCMutable());
  effects.emplace_back(MemoryEffects::Write::get(), &getCMutable());
  for (OpOperand &bias : getBiasMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &bias);
}

LogicalResult CopyOp::verify() {
  for (Value buffer : {getSrc(), getDst()})
    if (static_cast<uint64_t>(getBytes()) > bytesOf(buffer.getType()))
      return emitOpError() << "copies " << getBytes()
                           << " bytes, more than a buffer of "
                           << bytesOf(buffer.getType()) << " holds";
  return success();
}

LogicalResult LibraryCallOp::verify() {
  const megrt::LibraryKernelSignature *kernel =
      megrt::findLibraryKernel(getKernel().str());
  if (!kernel)
    return emitOpError() << "calls '" << getKernel()
                         << "', which is not a library kernel";
  ArrayRef<int64_t> slots = getSlots();
  if (slots.size() != getOperands().size())
    return emitOpError() << "has " << getOperands().size() << " operands and "
                         << slots.size() << " slots";
  size_t next = 0;
  for (auto [i, slot] : llvm::enumerate(slots)) {
    if (slot < static_cast<int64_t>(next) ||
        slot >= static_cast<int64_t>(kernel->operands.size()))
      return emitOpError() << "operand " << i << " fills slot " << slot << "; '"
                           << getKernel() << "' has " << kernel->operands.size()
                           << " operand slots, filled in order";
    for (; next < static_cast<size_t>(slot); ++next)
      if (!kernel->operands[next].optional)
        return emitOpError()
               << "leaves out operand '" << kernel->operands[next].name
               << "' of '" << getKernel() << "', which is not optional";
    next = slot + 1;
  }
  for (; next < kernel->operands.size(); ++next)
    if (!kernel->operands[next].optional)
      return emitOpError() << "leaves out operand '"
                           << kernel->operands[next].name << "' of '"
                           << getKernel() << "', which is not optional";
  if (getParams().size() != kernel->params.size())
    return emitOpError() << "passes " << getParams().size() << " parameters; '"
                         << getKernel() << "' takes " << kernel->params.size();
  return success();
}

void LibraryCallOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  const megrt::LibraryKernelSignature *kernel =
      megrt::findLibraryKernel(getKernel().str());
  for (auto [operand, slot] : llvm::zip(getOperandsMutable(), getSlots())) {
    bool writes = !kernel || slot < 0 ||
                  slot >= static_cast<int64_t>(kernel->operands.size()) ||
                  kernel->operands[slot].writes;
    if (writes)
      effects.emplace_back(MemoryEffects::Write::get(), &operand);
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand);
  }
}

LogicalResult CollectiveOp::verify() {
  const megrt::CollectiveInfo *info = nullptr;
  for (const megrt::CollectiveInfo &known : megrt::kCollectives)
    if (getKind() == known.name)
      info = &known;
  if (!info)
    return emitOpError() << "'" << getKind() << "' is not a collective";
  if (static_cast<int64_t>(getParams().size()) != info->params)
    return emitOpError() << "'" << getKind() << "' takes " << info->params
                         << " parameters, not " << getParams().size();
  StringRef reduce = getReduce();
  if (reduce != "sum" && reduce != "avg" && reduce != "max")
    return emitOpError() << "reduces by '" << reduce
                         << "'; one of sum, avg, max";
  return success();
}

LogicalResult WaitOp::verify() {
  auto started = getToken().getDefiningOp<CollectiveOp>();
  if (!started)
    return emitOpError() << "waits for a token no megrt.collective started";
  if (started.getSrc() != getSrc() || started.getDst() != getDst())
    return emitOpError() << "names buffers other than its collective's";
  return success();
}
