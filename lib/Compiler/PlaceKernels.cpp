//===- PlaceKernels.cpp - generated kernels ---===//
//
// Every op no library call carries out becomes a kernel function of its
// own in the kernel module (a fusion's body, constants cloned in), named
// after what it does; structurally equivalent kernels are generated once.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

#include "mlir/IR/IRMapping.h"

namespace megc {

/// The parameter read `value` is: a meg.param_ref, or a graph region's
/// argument bound to one.
ParamRefOp paramRefOf(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    if (auto region = dyn_cast<GraphRegionOp>(arg.getOwner()->getParentOp()))
      return region.getInputs()[arg.getArgNumber()].getDefiningOp<ParamRefOp>();
  return value.getDefiningOp<ParamRefOp>();
}

/// What a kernel is named after: its op, or the ops a fusion holds
/// (`fused_add_rms_norm`), so that listings show what each kernel does.
static std::string kernelLabel(Operation *op) {
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion)
    return op->getName().getStringRef().str();
  constexpr size_t kMaxNamed = 6;
  std::string label = "fused";
  size_t count = 0, total = fusion.getBody().front().getOperations().size() - 1;
  for (Operation &inner : fusion.getBody().front().without_terminator()) {
    if (inner.hasTrait<OpTrait::ConstantLike>()) {
      --total;
      continue;
    }
    if (count++ < kMaxNamed)
      label += "_" + inner.getName().stripDialect().str();
  }
  if (total > kMaxNamed)
    label += "_and_" + std::to_string(total - kMaxNamed) + "_more";
  return label;
}

/// A hash of what `kernel` computes: each op's name, attributes and result
/// types in order, not its values' identities or locations (kernelIndex
/// compares the functions in a bucket structurally).
static unsigned structuralHash(func::FuncOp kernel) {
  llvm::hash_code hash = mlir::hash_value(Type(kernel.getFunctionType()));
  kernel.getBody().walk([&](Operation *op) {
    hash =
        llvm::hash_combine(hash, OperationEquivalence::computeHash(
                                     op, OperationEquivalence::ignoreHashValue,
                                     OperationEquivalence::ignoreHashValue,
                                     OperationEquivalence::IgnoreLocations));
  });
  return static_cast<unsigned>(hash);
}

uint32_t ProgramBuilder::kernelIndex(func::FuncOp kernel, StringRef opName) {
  // Structurally equivalent functions (the same signature, attributes and
  // body: ops, attributes, types and dataflow, locations aside) share one
  // kernel.
  auto &bucket = kernelsByHash[structuralHash(kernel)];
  for (auto [known, index] : bucket)
    if (kernel.getFunctionType() == known.getFunctionType() &&
        kernel->getDiscardableAttrDictionary() ==
            known->getDiscardableAttrDictionary() &&
        kernel.getArgAttrsAttr() == known.getArgAttrsAttr() &&
        kernel.getResAttrsAttr() == known.getResAttrsAttr() &&
        OperationEquivalence::isRegionEquivalentTo(
            &kernel.getBody(), &known.getBody(),
            OperationEquivalence::IgnoreLocations)) {
      kernel.erase();
      return index;
    }
  uint32_t index = program.kernels.size();
  std::string name =
      "megk" + std::to_string(program.kernels.size()) + "_" + opName.str();
  std::replace(name.begin(), name.end(), '.', '_');
  kernel.setName(name);
  // Results updated in place take no argument of their own.
  unsigned inPlace = 0;
  if (auto attr = kernel->getAttrOfType<DenseI64ArrayAttr>(
          MegDialect::kInPlaceAttrName))
    inPlace =
        llvm::count_if(attr.asArrayRef(), [](int64_t arg) { return arg >= 0; });
  program.kernels.push_back(
      {name, static_cast<uint32_t>(kernel.getNumArguments() +
                                   kernel.getNumResults() - inPlace)});
  bucket.push_back({kernel, index});
  return index;
}

LogicalResult ProgramBuilder::placeKernel(Operation *op) {
  SmallVector<Value> inputs;
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>())
      continue;
    if (!llvm::is_contained(inputs, operand))
      inputs.push_back(operand);
  }
  for (Type type : op->getResultTypes())
    if (!isa<RankedTensorType>(type))
      return op->emitError()
             << "kernel result of type " << type << " is not a ranked tensor";

  builder.setInsertionPointToEnd(program.kernelModule->getBody());
  auto kernel = func::FuncOp::create(
      builder, op->getLoc(), "kernel",
      builder.getFunctionType(ValueRange(inputs).getTypes(),
                              op->getResultTypes()));
  Block *body = kernel.addEntryBlock();
  builder.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [input, arg] : llvm::zip(inputs, body->getArguments()))
    mapping.map(input, arg);
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (def->hasTrait<OpTrait::ConstantLike>() && !mapping.contains(operand))
        builder.clone(*def, mapping);
  SmallVector<Value> results;
  if (auto fusion = dyn_cast<FusionOp>(op)) {
    // The region's ops become the kernel's body.
    Block &region = fusion.getBody().front();
    for (auto [input, arg] :
         llvm::zip(fusion.getInputs(), region.getArguments()))
      mapping.map(arg, mapping.lookup(input));
    for (Operation &inner : region.without_terminator())
      builder.clone(inner, mapping);
    for (Value value : region.getTerminator()->getOperands())
      results.push_back(mapping.lookup(value));
  } else {
    llvm::append_range(results, builder.clone(*op, mapping)->getResults());
  }
  func::ReturnOp::create(builder, op->getLoc(), results);
  // Where an op stands in the model is not part of what it computes:
  // identical work in every layer, in every micro-batch and every pass of
  // a pipeline's schedule, and its recomputation, shares a kernel.
  kernel.walk([](Operation *inner) {
    inner->removeAttr(MegDialect::kLayerAttrName);
    inner->removeAttr(MegDialect::kMicroBatchAttrName);
    inner->removeAttr(MegDialect::kRecomputedAttrName);
    inner->removeAttr(MegDialect::kPipelinePassAttrName);
  });

  // Results that go straight into a parameter's storage; an optimizer
  // update overwrites the state it reads (meg.in_place on the kernel names,
  // per result, the argument it overwrites).
  SmallVector<std::optional<uint32_t>> stored;
  SmallVector<int64_t> inPlace(op->getNumResults(), -1);
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    stored.push_back(storedParameter(op, result));
    if (!stored.back() || !isa<AdamWOp>(op))
      continue;
    // AdamW is elementwise: result i updates operand i of (param, exp_avg,
    // exp_avg_sq), operands 0, 2 and 3.
    static constexpr unsigned kUpdated[] = {0, 2, 3};
    Value state = op->getOperand(kUpdated[index]);
    ParamRefOp ref = paramRefOf(state);
    if (ref && paramIndex.lookup(ref.getName()) == *stored.back())
      inPlace[index] = llvm::find(inputs, state) - inputs.begin();
  }
  if (llvm::any_of(inPlace, [](int64_t arg) { return arg >= 0; }))
    kernel->setAttr(MegDialect::kInPlaceAttrName,
                    builder.getDenseI64ArrayAttr(inPlace));

  LaunchCommand launch;
  launch.kernel = kernelIndex(kernel, kernelLabel(op));
  SmallVector<uint32_t> inputBuffers;
  for (Value input : inputs) {
    FailureOr<uint32_t> buffer = bufferFor(input);
    if (failed(buffer))
      return failure();
    inputBuffers.push_back(*buffer);
    launch.args.push_back(*buffer);
  }
  launch.numInputs = static_cast<uint32_t>(inputs.size());
  for (int64_t input : inPlace)
    if (input >= 0 && !llvm::is_contained(launch.updates, input))
      launch.updates.push_back(input);
  llvm::sort(launch.updates);
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    if (inPlace[index] >= 0) {
      buffers[result] = inputBuffers[inPlace[index]];
      continue;
    }
    uint32_t buffer =
        stored[index] ? addBuffer(BufferKind::Parameter, *stored[index], type)
                      : resultBuffer(result);
    buffers[result] = buffer;
    launch.args.push_back(buffer);
  }
  entry->commands.push_back(launch);
  return success();
}

} // namespace megc
