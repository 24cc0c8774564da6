//===- ModelBuilder.cpp - helpers to write model IR --------------------===//
//
// Implements the op-emitting helpers the presets share.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::meg;

namespace megc::gen {

llvm::Error configError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

llvm::Error checkPositive(
    std::initializer_list<std::pair<llvm::StringRef, int64_t>> sizes) {
  for (auto [flag, value] : sizes)
    if (value < 1)
      return configError("--" + flag + " must be >= 1, got " +
                         llvm::Twine(value));
  return llvm::Error::success();
}

SmallVector<Value> adaLnChunks(ModelBuilder &b, Value cond, StringRef prefix,
                               int64_t chunks) {
  Value emb = b.linear(b.silu(cond), prefix, /*bias=*/true);
  int64_t hidden = ModelBuilder::shapeOf(cond).back();
  return b.split(emb, 1, SmallVector<int64_t>(chunks, hidden));
}

Value gatedResidual(ModelBuilder &b, Value residual, Value gate,
                    Value update) {
  ArrayRef<int64_t> shape = ModelBuilder::shapeOf(gate);
  Value column = b.reshape(gate, {shape[0], 1, shape[1]});
  return b.add(residual, b.mul(column, update));
}

llvm::Expected<DType> parseDType(llvm::StringRef text) {
  if (text == "f32")
    return DType::F32;
  if (text == "bf16")
    return DType::BF16;
  if (text == "f16")
    return DType::F16;
  return configError("unknown dtype '" + text + "'; expected f32, bf16 or f16");
}

static Type elementTypeOf(MLIRContext &context, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return Float32Type::get(&context);
  case DType::BF16:
    return BFloat16Type::get(&context);
  case DType::F16:
    return Float16Type::get(&context);
  }
  llvm_unreachable("unknown dtype");
}

ModelBuilder::ModelBuilder(MLIRContext &context, DType dtype)
    : context(context), builder(&context), loc(UnknownLoc::get(&context)),
      activationType(elementTypeOf(context, dtype)) {
  context.loadDialect<MegDialect, func::FuncDialect, arith::ArithDialect>();
  module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  builder.setListener(&layerTagger);
}

void ModelBuilder::LayerTagger::notifyOperationInserted(
    Operation *op, OpBuilder::InsertPoint) {
  if (layer)
    op->setAttr(MegDialect::kLayerAttrName, layer);
}

void ModelBuilder::beginLayer(int64_t index) {
  layerTagger.layer = builder.getI64IntegerAttr(index);
}

void ModelBuilder::endLayer() { layerTagger.layer = {}; }

RankedTensorType ModelBuilder::tensor(ArrayRef<int64_t> shape) const {
  return RankedTensorType::get(shape, activationType);
}

RankedTensorType ModelBuilder::tensor(ArrayRef<int64_t> shape,
                                      Type element) const {
  return RankedTensorType::get(shape, element);
}

ArrayRef<int64_t> ModelBuilder::shapeOf(Value value) {
  return mlir::cast<RankedTensorType>(value.getType()).getShape();
}

void ModelBuilder::declare(StringRef name, ArrayRef<int64_t> shape,
                           InitKind kind, double scale,
                           ArrayRef<StringRef> aliases, Type element,
                           bool frozen, ArrayRef<StringRef> parts) {
  SmallVector<int64_t> local(shape);
  ShardingAttr sharding;
  // This rank's block along `dim` over the group of `axes`.
  auto split = [&](ArrayAttr axes, int64_t dim, int64_t ranks) {
    local[dim] /= ranks;
    sharding = ShardingAttr::get(
        &context, FlatSymbolRefAttr::get(&context, "world"), axes, shape, dim);
  };
  if (!parts.empty() && epSize > 1)
    split(epAxes(), 0, epSize);
  RankedTensorType type =
      element ? RankedTensorType::get(local, element) : tensor(local);
  paramTypes[name] = type;
  ParamOp::create(builder, loc, builder.getStringAttr(name),
                  TypeAttr::get(type),
                  InitAttr::get(&context, kind, APFloat(scale)),
                  frozen ? builder.getUnitAttr() : UnitAttr(),
                  /*state=*/nullptr, sharding,
                  aliases.empty() ? ArrayAttr() : builder.getStrArrayAttr(aliases),
                  parts.empty() ? ArrayAttr() : builder.getStrArrayAttr(parts));
}

ArrayAttr ModelBuilder::tpAxes() { return builder.getStrArrayAttr({"tp"}); }

ArrayAttr ModelBuilder::epAxes() { return builder.getStrArrayAttr({"ep"}); }

void ModelBuilder::declareMesh(ArrayAttr axes) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module->getBody());
  auto world = module->lookupSymbol<MeshOp>("world");
  if (!world) {
    SmallVector<StringRef> names = {"dp_outer", "dp_shard"};
    SmallVector<int64_t> sizes = {1, 1};
    if (epSize > 1) {
      names.push_back("ep");
      sizes.push_back(epSize);
    }
    names.push_back("tp");
    sizes.push_back(tpSize);
    world = MeshOp::create(builder, loc, builder.getStringAttr("world"),
                           builder.getStrArrayAttr(names),
                           builder.getDenseI64ArrayAttr(sizes));
  }
  builder.setInsertionPointAfter(world);
  SubmeshOp::create(builder, loc, FlatSymbolRefAttr::get(&context, "world"),
                    axes);
}

void ModelBuilder::setTensorParallel(int64_t tp, bool sequenceParallel) {
  tpSize = tp;
  declareMesh(tpAxes());
  module->getOperation()->setAttr(
      MegDialect::kTensorParallelAttrName,
      TensorParallelAttr::get(&context,
                              FlatSymbolRefAttr::get(&context, "world"),
                              tpAxes(), sequenceParallel));
}

void ModelBuilder::setExpertParallel(int64_t ep) {
  epSize = ep;
  if (ep > 1)
    declareMesh(epAxes());
}

void ModelBuilder::expertWeights(StringRef name, ArrayRef<int64_t> shape,
                                 ArrayRef<std::string> parts) {
  SmallVector<StringRef> names(parts.begin(), parts.end());
  declare(name, shape, InitKind::normal, initStd, {}, {}, /*frozen=*/false,
          names);
}

Value ModelBuilder::allToAllExperts(Value input) {
  return AllToAllOp::create(builder, loc, input,
                            FlatSymbolRefAttr::get(&context, "world"),
                            epAxes());
}

Value ModelBuilder::tpLayer(Value output, TpLayerKind kind, int64_t groups) {
  output.getDefiningOp()->setAttr(MegDialect::kTpLayerAttrName,
                                  TpLayerAttr::get(&context, kind, groups));
  return output;
}

void ModelBuilder::weight(StringRef name, ArrayRef<int64_t> shape,
                          ArrayRef<StringRef> aliases) {
  declare(name, shape, InitKind::normal, initStd, aliases);
}

void ModelBuilder::ones(StringRef name, ArrayRef<int64_t> shape) {
  declare(name, shape, InitKind::ones, 0.0);
}

void ModelBuilder::zeros(StringRef name, ArrayRef<int64_t> shape) {
  declare(name, shape, InitKind::zeros, 0.0);
}

void ModelBuilder::weightF32(StringRef name, ArrayRef<int64_t> shape) {
  declare(name, shape, InitKind::normal, initStd, {}, builder.getF32Type());
}

void ModelBuilder::frozenZerosF32(StringRef name, ArrayRef<int64_t> shape) {
  declare(name, shape, InitKind::zeros, 0.0, {}, builder.getF32Type(),
          /*frozen=*/true);
}

void ModelBuilder::linearParams(StringRef prefix, int64_t in, int64_t out,
                                bool bias) {
  weight((prefix + ".weight").str(), {out, in});
  if (bias)
    zeros((prefix + ".bias").str(), {out});
}

SmallVector<Value> ModelBuilder::beginFunction(StringRef name,
                                               ArrayRef<NamedType> args) {
  SmallVector<Type> types;
  for (const NamedType &arg : args)
    types.push_back(arg.type);
  builder.setInsertionPointToEnd(module->getBody());
  currentFunction = func::FuncOp::create(
      builder, loc, name, builder.getFunctionType(types, {}));
  for (auto [index, arg] : llvm::enumerate(args))
    currentFunction.setArgAttr(index, MegDialect::kNameAttrName,
                               builder.getStringAttr(arg.name));
  Block *entry = currentFunction.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  return SmallVector<Value>(entry->getArguments());
}

void ModelBuilder::endFunction(ArrayRef<NamedValue> results) {
  SmallVector<Value> values;
  SmallVector<Type> types;
  for (const NamedValue &result : results) {
    values.push_back(result.value);
    types.push_back(result.value.getType());
  }
  func::ReturnOp::create(builder, loc, values);
  currentFunction.setFunctionType(builder.getFunctionType(
      currentFunction.getArgumentTypes(), types));
  for (auto [index, result] : llvm::enumerate(results))
    currentFunction.setResultAttr(index, MegDialect::kNameAttrName,
                                  builder.getStringAttr(result.name));
}

void ModelBuilder::makePrivate() { currentFunction.setPrivate(); }

ValueRange ModelBuilder::call(StringRef name, ValueRange args) {
  auto callee = module->lookupSymbol<func::FuncOp>(name);
  assert(callee && "calling a function that was not built");
  return func::CallOp::create(builder, loc, callee, args).getResults();
}

Value ModelBuilder::param(StringRef name) {
  auto it = paramTypes.find(name);
  assert(it != paramTypes.end() && "reading an undeclared parameter");
  return ParamRefOp::create(builder, loc, it->second,
                            FlatSymbolRefAttr::get(&context, name));
}

Value ModelBuilder::linear(Value input, StringRef prefix, bool bias) {
  return linearWith(input, (prefix + ".weight").str(),
                    bias ? param((prefix + ".bias").str()) : Value());
}

Value ModelBuilder::linearWith(Value input, StringRef weightName,
                               Value bias) {
  return LinearOp::create(builder, loc, input, param(weightName), bias);
}

Value ModelBuilder::rmsNorm(Value input, StringRef weightName, double eps) {
  return RmsNormOp::create(builder, loc, input, param(weightName),
                           builder.getF64FloatAttr(eps));
}

Value ModelBuilder::layerNorm(Value input, double eps) {
  return LayerNormOp::create(builder, loc, input.getType(), input, Value(),
                             Value(), builder.getF64FloatAttr(eps));
}

Value ModelBuilder::add(Value lhs, Value rhs) {
  return AddOp::create(builder, loc, lhs, rhs);
}
Value ModelBuilder::sub(Value lhs, Value rhs) {
  return SubOp::create(builder, loc, lhs, rhs);
}
Value ModelBuilder::mul(Value lhs, Value rhs) {
  return MulOp::create(builder, loc, lhs, rhs);
}
Value ModelBuilder::div(Value lhs, Value rhs) {
  return DivOp::create(builder, loc, lhs, rhs);
}
Value ModelBuilder::stopGradient(Value input) {
  return StopGradientOp::create(builder, loc, input);
}
Value ModelBuilder::neg(Value input) {
  return NegOp::create(builder, loc, input);
}
Value ModelBuilder::silu(Value input) {
  return SiluOp::create(builder, loc, input);
}
Value ModelBuilder::geluTanh(Value input) {
  return GeluOp::create(builder, loc, input, GeluApproximation::tanh);
}
Value ModelBuilder::cos(Value input) {
  return CosOp::create(builder, loc, input);
}
Value ModelBuilder::sin(Value input) {
  return SinOp::create(builder, loc, input);
}

Value ModelBuilder::cast(Value input, Type element) {
  auto type = mlir::cast<RankedTensorType>(input.getType());
  if (type.getElementType() == element)
    return input;
  return CastOp::create(builder, loc, type.clone(element), input);
}

Value ModelBuilder::reshape(Value input, ArrayRef<int64_t> shape) {
  auto type = mlir::cast<RankedTensorType>(input.getType());
  return ReshapeOp::create(builder, loc, type.clone(shape), input);
}

Value ModelBuilder::slice(Value input, ArrayRef<int64_t> offsets,
                          ArrayRef<int64_t> sizes, ArrayRef<int64_t> strides) {
  return SliceOp::create(builder, loc, input, offsets, sizes, strides);
}

Value ModelBuilder::sliceLast(Value input, int64_t offset, int64_t size,
                              int64_t stride) {
  ArrayRef<int64_t> shape = shapeOf(input);
  SmallVector<int64_t> offsets(shape.size(), 0), sizes(shape),
      strides(shape.size(), 1);
  offsets.back() = offset;
  sizes.back() = size;
  strides.back() = stride;
  return slice(input, offsets, sizes, strides);
}

void ModelBuilder::expertBiasUpdate(StringRef bias, Value load, double rate) {
  ExpertBiasUpdateOp::create(builder, loc,
                             FlatSymbolRefAttr::get(&context, bias), load,
                             builder.getF64FloatAttr(rate));
}

Value ModelBuilder::transpose(Value input, ArrayRef<int64_t> permutation) {
  return TransposeOp::create(builder, loc, input,
                             builder.getDenseI64ArrayAttr(permutation));
}

Value ModelBuilder::concat(ValueRange inputs, int64_t axis) {
  return ConcatOp::create(builder, loc, inputs, axis);
}

SmallVector<Value> ModelBuilder::split(Value input, int64_t axis,
                                       ArrayRef<int64_t> sizes) {
  auto op = SplitOp::create(builder, loc, input, axis, sizes);
  return SmallVector<Value>(op.getResults());
}

Value ModelBuilder::attention(Value query, Value key, Value value,
                              bool causal) {
  return attention(query, key, value, causal,
                   1.0 / std::sqrt(static_cast<double>(shapeOf(query).back())));
}

Value ModelBuilder::attention(Value query, Value key, Value value, bool causal,
                              double scale) {
  return AttentionOp::create(builder, loc, query, key, value,
                             /*positions=*/Value(),
                             causal ? builder.getUnitAttr() : UnitAttr(),
                             builder.getF64FloatAttr(scale),
                             /*keep_stats=*/UnitAttr())
      .getResult();
}

Value ModelBuilder::modulate(Value input, Value shift, Value scale) {
  return ModulateOp::create(builder, loc, input, shift, scale);
}

Value ModelBuilder::embedding(Value table, Value ids) {
  return EmbeddingOp::create(builder, loc, table, ids, Value());
}

Value ModelBuilder::matmul(Value lhs, Value rhs, bool transposeRhs) {
  return MatmulOp::create(builder, loc, lhs, rhs, /*transpose_lhs=*/false,
                          transposeRhs);
}

Value ModelBuilder::reduceSum(Value input, ArrayRef<int64_t> dims) {
  return ReduceOp::create(builder, loc, ReduceKind::sum, input, dims,
                          /*keep_dims=*/false);
}

Value ModelBuilder::broadcastTo(Value input, ArrayRef<int64_t> shape) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  return BroadcastOp::create(builder, loc,
                             RankedTensorType::get(shape, type.getElementType()),
                             input);
}

Value ModelBuilder::sigmoid(Value input) {
  return SigmoidOp::create(builder, loc, input);
}

std::pair<Value, Value> ModelBuilder::moeRoute(Value scores, Value bias,
                                               int64_t topK, int64_t groups,
                                               int64_t topGroups,
                                               bool normalize, double scaling) {
  int64_t tokens = shapeOf(scores)[0];
  auto route = MoeRouteOp::create(
      builder, loc, tensor({tokens, topK}, builder.getI32Type()),
      tensor({tokens, topK}, builder.getF32Type()), scores, bias,
      builder.getI64IntegerAttr(topK), builder.getI64IntegerAttr(groups),
      builder.getI64IntegerAttr(topGroups),
      normalize ? builder.getUnitAttr() : UnitAttr(),
      builder.getF64FloatAttr(scaling));
  return {route.getExperts(), route.getWeights()};
}

ModelBuilder::MoeSlots ModelBuilder::moeAssign(Value experts, Value weights,
                                               int64_t numExperts,
                                               int64_t capacity,
                                               bool byWeight) {
  ArrayRef<int64_t> shape = shapeOf(experts);
  Type i32 = builder.getI32Type();
  auto assign = MoeAssignOp::create(
      builder, loc, tensor({numExperts, capacity}, i32),
      tensor({numExperts, capacity}, i32), tensor(shape, i32),
      tensor({numExperts}, i32), tensor({}, i32), experts, weights,
      builder.getI64IntegerAttr(numExperts), builder.getI64IntegerAttr(capacity),
      DropPolicyAttr::get(&context,
                          byWeight ? DropPolicy::probs : DropPolicy::position));
  return {assign.getSlotTokens(), assign.getSlotChoices(),
          assign.getPositions(), assign.getLoad(), assign.getDropped()};
}

Value ModelBuilder::gatherRows(Value source, Value index, Value inverse) {
  auto sourceType = llvm::cast<RankedTensorType>(source.getType());
  SmallVector<int64_t> shape(shapeOf(index));
  shape.push_back(sourceType.getDimSize(1));
  return GatherRowsOp::create(
      builder, loc, RankedTensorType::get(shape, sourceType.getElementType()),
      source, index, inverse);
}

Value ModelBuilder::iota(int64_t size) {
  return IotaOp::create(builder, loc, tensor({size}, builder.getF32Type()), 0);
}

Value ModelBuilder::constantF32(ArrayRef<float> values) {
  auto type = tensor({static_cast<int64_t>(values.size())},
                     builder.getF32Type());
  return arith::ConstantOp::create(builder, loc, type,
                                   DenseElementsAttr::get(type, values));
}

Value ModelBuilder::crossEntropyMean(Value logits, Value labels,
                                     std::optional<int64_t> ignoreIndex) {
  if (!ignoreIndex)
    return CrossEntropyOp::create(builder, loc, logits, labels,
                                  ReduceKind::mean, IntegerAttr());
  Value sum = CrossEntropyOp::create(builder, loc, logits, labels,
                                     ReduceKind::sum,
                                     builder.getI64IntegerAttr(*ignoreIndex));
  Value count = LabelCountOp::create(
      builder, loc, RankedTensorType::get({}, builder.getF32Type()), labels,
      builder.getI64IntegerAttr(*ignoreIndex), builder.getUnitAttr());
  return DivOp::create(builder, loc, sum, count);
}

Value ModelBuilder::meanSquaredError(Value prediction, Value target) {
  Value diff = sub(prediction, target);
  Value squared = mul(diff, diff);
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < static_cast<int64_t>(shapeOf(prediction).size()); ++d)
    dims.push_back(d);
  Value mean = ReduceOp::create(builder, loc, ReduceKind::mean, squared, dims,
                                /*keep_dims=*/false);
  return cast(mean, builder.getF32Type());
}

llvm::Expected<OwningOpRef<ModuleOp>> ModelBuilder::finish() {
  std::string diagnostics;
  {
    llvm::raw_string_ostream os(diagnostics);
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      os << diag << "\n";
      return success();
    });
    if (failed(verify(*module)))
      return configError("internal error: the generated model does not "
                         "verify:\n" +
                         diagnostics);
  }
  return std::move(module);
}

} // namespace megc::gen
