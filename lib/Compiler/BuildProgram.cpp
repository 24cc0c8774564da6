//===- BuildProgram.cpp - entry functions to commands and kernels ------===//
//
// Walks each public function in order and places every op: parameter reads
// and inputs become buffers, reshapes become views, matrix products GEMM
// commands, and every other op a kernel function of its own (identical
// kernels are generated once). Returned values are copied to the outputs.
//
//===----------------------------------------------------------------------===//

#include "megc/Compiler/Program.h"
#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megrt/EmbeddingGradScratch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace mlir::meg;

namespace megc {

uint64_t BufferDesc::sizeBytes() const {
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return static_cast<uint64_t>(type.getNumElements()) * (bits / 8);
}

namespace {

constexpr llvm::StringLiteral kInPlaceAttrName = MegDialect::kInPlaceAttrName;

/// The name an entry argument or result carries (`meg.name`), or a
/// positional default.
std::string valueName(func::FuncOp func, bool result, unsigned index) {
  StringAttr name =
      result
          ? func.getResultAttrOfType<StringAttr>(index,
                                                 MegDialect::kNameAttrName)
          : func.getArgAttrOfType<StringAttr>(index, MegDialect::kNameAttrName);
  if (name)
    return name.str();
  return (result ? "result" : "arg") + std::to_string(index);
}

class ProgramBuilder {
public:
  ProgramBuilder(ModuleOp module, const CompileOptions &options)
      : module(module), options(options), builder(module.getContext()) {}

  FailureOr<ProgramDesc> build() {
    program.kernelModule = ModuleOp::create(module.getLoc());
    if (auto config =
            module->getAttrOfType<StringAttr>(MegDialect::kHfConfigAttrName))
      program.hfConfig = config.str();
    program.memoryBudget = options.memoryBudget;
    if (failed(describeMesh()))
      return failure();
    for (ParamOp param : module.getOps<ParamOp>()) {
      paramIndex[param.getSymName()] = program.parameters.size();
      InitAttr init = param.getInit();
      program.parameters.push_back(
          {param.getSymName().str(), param.getTensorType(), param.isTrainable(),
           stringifyInitKind(init.getKind()).str(),
           init.getScale().convertToDouble(), param.getState(),
           init.getSource() ? init.getSource().getValue().str() : ""});
      program.parameters.back().nonNegative =
          param->hasAttr(MegDialect::kNonNegativeAttrName);
      if (ArrayAttr aliases = param.getAliasesAttr())
        for (Attribute alias : aliases)
          program.parameters.back().aliases.push_back(
              cast<StringAttr>(alias).str());
      if (ArrayAttr parts = param.getPartsAttr())
        for (Attribute part : parts)
          program.parameters.back().parts.push_back(
              cast<StringAttr>(part).str());
      if (ShardingAttr sharding = param.getShardingAttr()) {
        FailureOr<uint32_t> group =
            submeshIndex(param, sharding.getMesh(), sharding.getAxes());
        if (failed(group))
          return failure();
        program.parameters.back().shardSubmesh = *group;
        program.parameters.back().fullShape.assign(sharding.getShape().begin(),
                                                   sharding.getShape().end());
        program.parameters.back().shardDim = sharding.getDim();
        if (ArrayAttr blockAxes = sharding.getBlockAxes()) {
          FailureOr<uint32_t> blocks =
              submeshIndex(param, sharding.getMesh(), blockAxes);
          if (failed(blocks))
            return failure();
          program.parameters.back().blockSubmesh = *blocks;
        }
      }
    }
    if (failed(describeLrSchedule()))
      return failure();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isPrivate() || func.isExternal())
        continue;
      if (failed(buildEntry(func)))
        return failure();
    }
    if (program.entries.empty())
      return module.emitError()
             << "has no public function to compile as an entry point";
    return std::move(program);
  }

private:
  /// The schedule's state parameters, as meg-optimizer recorded them.
  LogicalResult describeLrSchedule() {
    auto schedule =
        module->getAttrOfType<LrScheduleAttr>(MegDialect::kLrScheduleAttrName);
    if (!schedule || !schedule.getLrParam())
      return success();
    auto adamw =
        module->getAttrOfType<AdamWAttr>(MegDialect::kOptimizerAttrName);
    auto lr = paramIndex.find(schedule.getLrParam().getValue());
    auto step = paramIndex.find(
        schedule.getStepParam() ? schedule.getStepParam().getValue() : "");
    if (!adamw || lr == paramIndex.end() || step == paramIndex.end())
      return module.emitError()
             << "'" << MegDialect::kLrScheduleAttrName
             << "' names lr and step parameters that are not declared";
    program.lrSchedule =
        LrScheduleDesc{static_cast<uint32_t>(schedule.getKind()),
                       adamw.getLr().convertToDouble(),
                       schedule.getMinLr().convertToDouble(),
                       schedule.getInitLr().convertToDouble(),
                       schedule.getWarmup(),
                       schedule.getDecay(),
                       schedule.getWsdDecay(),
                       static_cast<uint32_t>(schedule.getWsdStyle()),
                       static_cast<uint32_t>(lr->second),
                       static_cast<uint32_t>(step->second)};
    return success();
  }
  LogicalResult describeMesh();
  FailureOr<uint32_t> submeshIndex(Operation *user, FlatSymbolRefAttr mesh,
                                   ArrayAttr axes);
  LogicalResult placeCollective(Operation *op);
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
  LogicalResult placeEmbeddingGrad(EmbeddingGradOp op);
  LogicalResult placeLinear(LinearOp op);
  bool accumulateInto(Operation *product, GemmCommand &gemm);
  LogicalResult placeMatmul(MatmulOp op);
  uint32_t kernelIndex(func::FuncOp kernel, StringRef opName);

  ModuleOp module;
  const CompileOptions &options;
  OpBuilder builder;
  ProgramDesc program;
  llvm::StringMap<uint32_t> paramIndex;
  std::map<std::string, uint32_t> kernelByBody;
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

LogicalResult ProgramBuilder::describeMesh() {
  auto meshes = llvm::to_vector(module.getOps<MeshOp>());
  if (meshes.empty())
    return success();
  if (meshes.size() > 1)
    return meshes[1].emitError()
           << "a program runs on one mesh; this module declares "
           << meshes.size();
  mesh = meshes.front();
  MeshDesc desc{mesh.getSymName().str(), {}};
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
    desc.axes.push_back({cast<StringAttr>(name).str(), size});
  program.mesh = std::move(desc);
  for (SubmeshOp submesh : module.getOps<SubmeshOp>()) {
    std::vector<std::string> axes;
    for (Attribute axis : submesh.getAxes())
      axes.push_back(cast<StringAttr>(axis).str());
    program.submeshes.push_back(std::move(axes));
  }
  // With FSDP, every entry input is this rank's slice of the global batch.
  if (auto fsdp = module->getAttrOfType<FsdpAttr>(MegDialect::kFsdpAttrName)) {
    SmallVector<Attribute> axes;
    if (fsdp.getOuter())
      llvm::append_range(axes, fsdp.getOuter());
    llvm::append_range(axes, fsdp.getShard());
    FailureOr<uint32_t> group = submeshIndex(
        module, fsdp.getMesh(), ArrayAttr::get(module.getContext(), axes));
    if (failed(group))
      return failure();
    inputSplit = *group;
  }
  return success();
}

FailureOr<uint32_t> ProgramBuilder::submeshIndex(Operation *user,
                                                 FlatSymbolRefAttr meshRef,
                                                 ArrayAttr axes) {
  if (!mesh || meshRef.getValue() != mesh.getSymName())
    return user->emitError() << "refers to mesh " << meshRef
                             << ", which the program does not declare";
  for (auto [index, submesh] : llvm::enumerate(module.getOps<SubmeshOp>()))
    if (submesh.getAxesAttr() == axes)
      return static_cast<uint32_t>(index);
  return user->emitError() << "uses the group " << meshRef << axes
                           << ", which is not a registered meg.submesh";
}

uint32_t ProgramBuilder::addBuffer(BufferKind kind, uint32_t index,
                                   RankedTensorType type, int32_t aliasOf) {
  BufferDesc buffer;
  buffer.kind = kind;
  buffer.index = index;
  buffer.type = type;
  buffer.aliasOf = aliasOf;
  entry->buffers.push_back(buffer);
  return entry->buffers.size() - 1;
}

/// The tightest table an integer input indexes, through views, slices and
/// graph regions and fusions: the rows of an embedding it looks up, the classes
/// of a cross-entropy it labels; and the label those cross-entropies ignore, if
/// every use that indexes with it ignores the same one.
/// The parameter an embedding table is read from, through the gathers and
/// reshapes of FSDP and the regions that pass it in; null if none.
static ParamOp tableParam(Value table) {
  for (int step = 0; step < 16 && table; ++step) {
    if (auto arg = dyn_cast<BlockArgument>(table)) {
      Operation *owner = arg.getOwner()->getParentOp();
      if (auto region = dyn_cast<GraphRegionOp>(owner))
        table = region.getInputs()[arg.getArgNumber()];
      else if (auto fusion = dyn_cast<FusionOp>(owner))
        table = fusion.getInputs()[arg.getArgNumber()];
      else
        return {};
      continue;
    }
    Operation *def = table.getDefiningOp();
    if (auto ref = dyn_cast<ParamRefOp>(def))
      return SymbolTable::lookupNearestSymbolFrom<ParamOp>(ref,
                                                           ref.getNameAttr());
    if (auto wait = dyn_cast<WaitOp>(def))
      def = wait.getFuture().getDefiningOp();
    if (!def || !isa<ReshapeOp, SliceOp, AllGatherOp, AllGatherStartOp>(def))
      return {};
    table = def->getOperand(0);
  }
  return {};
}

void ProgramBuilder::indexBoundOf(Value input, TensorSpec &spec) {
  std::optional<int64_t> ignore;
  bool everyUseIgnores = true;
  auto ignoring = [&](std::optional<int64_t> index) {
    if (!index || (ignore && *ignore != *index))
      everyUseIgnores = false;
    ignore = index;
  };
  auto bound = [&](int64_t size, StringRef use) {
    if (spec.indexBound == 0 || size < spec.indexBound) {
      spec.indexBound = size;
      spec.indexUse = use.str();
    }
  };
  std::function<void(Value)> visit = [&](Value value) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      auto dim = [](Value tensor, int64_t axis) {
        auto type = cast<RankedTensorType>(tensor.getType());
        return type.getDimSize(axis < 0 ? type.getRank() + axis : axis);
      };
      if (isa<ReshapeOp, SliceOp>(user)) {
        visit(user->getResult(0));
      } else if (auto region = dyn_cast<GraphRegionOp>(user)) {
        visit(region.getBody().front().getArgument(
            use.getOperandNumber() -
            region.getInputs().getBeginOperandIndex()));
      } else if (auto fusion = dyn_cast<FusionOp>(user)) {
        visit(fusion.getBody().front().getArgument(
            use.getOperandNumber() -
            fusion.getInputs().getBeginOperandIndex()));
      } else if (auto embedding = dyn_cast<EmbeddingOp>(user)) {
        if (use.get() == embedding.getIds()) {
          // A block of a vocab-parallel table: the whole table's rows.
          int64_t rows = dim(embedding.getTable(), 0);
          if (embedding.getFirstRow())
            if (ParamOp param = tableParam(embedding.getTable()))
              rows = param.getFullShape()[0];
          bound(rows, "rows of the embedding table");
          ignoring(std::nullopt);
        }
      } else if (auto stats = dyn_cast<VocabShardStatsOp>(user)) {
        if (use.get() == stats.getLabels()) {
          bound(stats.getVocab(), "classes of the cross-entropy");
          ignoring(stats.getIgnoreIndex());
        }
      } else if (auto loss = dyn_cast<CrossEntropyOp>(user)) {
        if (use.get() == loss.getLabels()) {
          bound(dim(loss.getLogits(), -1), "classes of the cross-entropy");
          ignoring(loss.getIgnoreIndex());
        }
      } else if (auto lossGrad = dyn_cast<CrossEntropyGradOp>(user)) {
        if (use.get() == lossGrad.getLabels()) {
          bound(dim(lossGrad.getLogits(), -1), "classes of the cross-entropy");
          ignoring(lossGrad.getIgnoreIndex());
        }
      }
    }
  };
  visit(input);
  if (spec.indexBound > 0 && everyUseIgnores)
    spec.indexIgnore = ignore;
}

LogicalResult ProgramBuilder::buildEntry(func::FuncOp func) {
  // Identities for autodiff: copy_to_group (still there without autodiff,
  // in an inference build) and stop_gradient; a result is its input's
  // buffer.
  func.walk([](Operation *op) {
    if (!isa<CopyToGroupOp, StopGradientOp>(op))
      return;
    op->getResult(0).replaceAllUsesWith(op->getOperand(0));
    op->erase();
  });
  program.entries.emplace_back();
  entry = &program.entries.back();
  entry->name = func.getName().str();
  buffers.clear();
  for (auto [index, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return func.emitError()
             << "entry argument " << index << " must be a ranked tensor, got "
             << arg.getType();
    entry->inputs.push_back({valueName(func, false, index), type, inputSplit});
    if (isa<IntegerType>(type.getElementType()))
      indexBoundOf(arg, entry->inputs.back());
    buffers[arg] = addBuffer(BufferKind::Input, index, type);
  }
  for (Operation &op : func.getBody().front())
    if (failed(placeOp(&op)))
      return failure();
  return success();
}

FailureOr<uint32_t> ProgramBuilder::bufferFor(Value value) {
  auto it = buffers.find(value);
  if (it != buffers.end())
    return it->second;
  // A constant read by a command other than a kernel gets a kernel that
  // writes it.
  if (Operation *def = value.getDefiningOp()) {
    if (def->hasTrait<OpTrait::ConstantLike>()) {
      if (failed(placeKernel(def)))
        return failure();
      return buffers.lookup(value);
    }
  }
  return emitError(value.getLoc()) << "value has no buffer";
}

LogicalResult ProgramBuilder::placeOp(Operation *op) {
  size_t first = entry->commands.size();
  LogicalResult placed = placeOpCommands(op);
  // The commands of a recomputation, for the entry's recompute_flops.
  entry->recomputed.resize(entry->commands.size(), false);
  if (op->hasAttr(MegDialect::kRecomputedAttrName))
    std::fill(entry->recomputed.begin() + first, entry->recomputed.end(), true);
  return placed;
}

LogicalResult ProgramBuilder::placeOpCommands(Operation *op) {
  if (absorbed.contains(op))
    return success();
  if (op->hasTrait<OpTrait::ConstantLike>())
    return success(); // cloned into the kernels that read it
  if (auto ref = dyn_cast<ParamRefOp>(op)) {
    buffers[ref.getResult()] =
        addBuffer(BufferKind::Parameter, paramIndex.lookup(ref.getName()),
                  cast<RankedTensorType>(ref.getType()));
    return success();
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    FailureOr<uint32_t> source = bufferFor(reshape.getInput());
    if (failed(source))
      return failure();
    const BufferDesc &from = entry->buffers[*source];
    int32_t root = from.aliasOf >= 0 ? from.aliasOf : *source;
    buffers[reshape.getResult()] = addBuffer(
        from.kind, from.index, cast<RankedTensorType>(reshape.getType()), root);
    return success();
  }
  if (auto store = dyn_cast<ParamStoreOp>(op)) {
    // Stores come after every read of the entry (meg-optimizer puts them
    // last), so a copy into the parameter's storage is the update.
    FailureOr<uint32_t> source = bufferFor(store.getValue());
    if (failed(source))
      return failure();
    uint32_t index = paramIndex.lookup(store.getName());
    auto type = cast<RankedTensorType>(store.getValue().getType());
    // Computed in the parameter's storage already (an update in place).
    const BufferDesc &from = entry->buffers[*source];
    if (from.kind == BufferKind::Parameter && from.index == index &&
        from.offset == 0 && from.type == type)
      return success();
    uint32_t param = addBuffer(BufferKind::Parameter, index, type);
    entry->commands.push_back(
        CopyCommand{*source, param, entry->buffers[param].sizeBytes()});
    return success();
  }
  if (auto linear = dyn_cast<LinearOp>(op))
    return placeLinear(linear);
  if (isa<AttentionOp, AttentionGradOp>(op))
    return placeAttention(op);
  if (auto embeddingGrad = dyn_cast<EmbeddingGradOp>(op))
    return placeEmbeddingGrad(embeddingGrad);
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return placeMatmul(matmul);
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    auto func = cast<func::FuncOp>(op->getParentOp());
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type)
        return ret.emitError()
               << "entry result " << index << " must be a ranked tensor";
      FailureOr<uint32_t> source = bufferFor(value);
      if (failed(source))
        return failure();
      entry->outputs.push_back({valueName(func, true, index), type});
      // Computed into the output already (resultBuffer).
      const BufferDesc &from = entry->buffers[*source];
      if (from.kind == BufferKind::Output && from.aliasOf < 0 &&
          from.index == index)
        continue;
      uint32_t output = addBuffer(BufferKind::Output, index, type);
      entry->commands.push_back(
          CopyCommand{*source, output, entry->buffers[output].sizeBytes()});
    }
    return success();
  }
  if (isa<func::CallOp>(op))
    return op->emitError() << "calls must be inlined before building the "
                              "program";
  if (isa<FusionOp>(op))
    return placeKernel(op);
  if (auto region = dyn_cast<GraphRegionOp>(op))
    return placeGraphRegion(region);
  if (isa<CollectiveOpInterface, WaitOp>(op))
    return placeCollective(op);
  if (op->getNumRegions() != 0)
    return op->emitError() << "'" << op->getName()
                           << "' is not supported by the program lowering yet";
  return placeKernel(op);
}

/// Collectives run on contiguous buffers: gathering or scattering along a
/// dimension is a byte-range operation only when every dimension before it
/// has extent 1.
static CollectiveCommand::Reduce reduceOf(CollectiveReduce reduce) {
  switch (reduce) {
  case CollectiveReduce::avg:
    return CollectiveCommand::Reduce::Avg;
  case CollectiveReduce::max:
    return CollectiveCommand::Reduce::Max;
  case CollectiveReduce::sum:
    break;
  }
  return CollectiveCommand::Reduce::Sum;
}

LogicalResult ProgramBuilder::placeCollective(Operation *op) {
  if (auto wait = dyn_cast<WaitOp>(op)) {
    auto it = started.find(wait.getFuture());
    if (it == started.end())
      return op->emitError() << "waits for a collective this entry did not "
                                "start";
    entry->commands.push_back(it->second);
    buffers[wait.getResult()] = it->second.dst;
    return success();
  }
  auto input = op->getOperand(0);
  auto inputType = cast<RankedTensorType>(input.getType());
  auto collective = cast<CollectiveOpInterface>(op);
  RankedTensorType producedType = collective.getProducedType();
  CollectiveCommand command{};
  std::optional<int64_t> dim;
  TypeSwitch<Operation *>(op)
      .Case<AllGatherOp, AllGatherStartOp>([&](auto gather) {
        command.kind = CollectiveCommand::Kind::AllGather;
        dim = gather.getDim();
      })
      .Case<ReduceScatterOp, ReduceScatterStartOp>([&](auto scatter) {
        command.kind = CollectiveCommand::Kind::ReduceScatter;
        command.reduce = reduceOf(scatter.getReduce());
        dim = scatter.getDim();
      })
      .Case<ShardSliceOp>([&](ShardSliceOp slice) {
        command.kind = CollectiveCommand::Kind::Slice;
        dim = slice.getDim();
      })
      .Case<AllReduceOp, AllReduceStartOp>([&](auto reduce) {
        command.kind = CollectiveCommand::Kind::AllReduce;
        command.reduce = reduceOf(reduce.getReduce());
      })
      .Case<AllToAllOp, AllToAllStartOp>(
          [&](auto) { command.kind = CollectiveCommand::Kind::AllToAll; });
  if (dim)
    for (int64_t before = 0; before < *dim; ++before)
      if (inputType.getDimSize(before) != 1)
        return op->emitError()
               << "gathers or scatters along dim " << *dim << ", but dim "
               << before << " has extent " << inputType.getDimSize(before)
               << "; the runtime moves contiguous pieces (reshape so that "
                  "the dimension is the outermost)";
  auto mesh = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  FailureOr<uint32_t> group = submeshIndex(op, mesh, axes);
  FailureOr<uint32_t> src = bufferFor(input);
  if (failed(group) || failed(src))
    return failure();
  command.submesh = *group;
  command.src = *src;
  // A gathered weight lands in the parameter's storage (through views).
  std::optional<uint32_t> stored;
  if (isa<AllGatherOp>(op))
    stored = storedParameter(op, op->getResult(0));
  command.dst = stored ? addBuffer(BufferKind::Parameter, *stored, producedType)
                       : addBuffer(BufferKind::Arena, 0, producedType);
  command.count = command.kind == CollectiveCommand::Kind::AllGather
                      ? inputType.getNumElements()
                      : producedType.getNumElements();
  if (command.kind == CollectiveCommand::Kind::AllToAll) {
    // count is the piece each pair of ranks exchanges.
    SymbolTableCollection table;
    FailureOr<int64_t> size = SubmeshOp::verifyGroup(op, table, mesh, axes);
    if (failed(size))
      return failure();
    command.count = producedType.getNumElements() / *size;
  }
  command.async = collective.isStarted();
  if (command.async)
    started[op->getResult(0)] =
        WaitCommand{static_cast<uint32_t>(entry->commands.size()), command.src,
                    command.dst};
  else
    buffers[op->getResult(0)] = command.dst;
  entry->commands.push_back(command);
  return success();
}

/// Attention and its gradient run as the runtime's fused attention (which
/// never materialises the scores) rather than as generated kernels.
LogicalResult ProgramBuilder::placeAttention(Operation *op) {
  auto forward = dyn_cast<AttentionOp>(op);
  auto backward = dyn_cast<AttentionGradOp>(op);
  Value q = forward ? forward.getQuery() : backward.getQuery();
  Value k = forward ? forward.getKey() : backward.getKey();
  Value v = forward ? forward.getValue() : backward.getValue();
  SmallVector<Value> reads = {q, k, v};
  if (backward)
    reads.append({backward.getOutput(), backward.getGrad()});
  if (backward && backward.getStats())
    reads.push_back(backward.getStats());
  SmallVector<uint32_t> in;
  for (Value value : reads) {
    FailureOr<uint32_t> buffer = bufferFor(value);
    if (failed(buffer))
      return failure();
    in.push_back(*buffer);
  }
  SmallVector<uint32_t> out;
  for (Value result : op->getResults()) {
    uint32_t buffer = resultBuffer(result);
    buffers[result] = buffer;
    out.push_back(buffer);
  }
  ArrayRef<int64_t> qShape = cast<RankedTensorType>(q.getType()).getShape();
  ArrayRef<int64_t> kShape = cast<RankedTensorType>(k.getType()).getShape();
  ArrayRef<int64_t> vShape = cast<RankedTensorType>(v.getType()).getShape();
  AttentionCommand command;
  command.backward = static_cast<bool>(backward);
  command.q = in[0];
  command.k = in[1];
  command.v = in[2];
  command.batch = qShape[0];
  command.seqQ = qShape[1];
  command.heads = qShape[2];
  command.headDim = qShape[3];
  command.seqKv = kShape[1];
  command.kvHeads = kShape[2];
  command.valueDim = vShape[3];
  command.causal = forward ? forward.getCausal() : backward.getCausal();
  command.scale = static_cast<float>(
      (forward ? forward.getScale() : backward.getScale()).convertToDouble());
  if (backward) {
    command.out = in[3];
    command.gradOut = in[4];
    command.gradQ = out[0];
    command.gradK = out[1];
    command.gradV = out[2];
    if (backward.getStats())
      command.stats = static_cast<int32_t>(in[5]);
  } else {
    command.out = out[0];
    if (forward.getStats())
      command.stats = static_cast<int32_t>(out[1]);
  }
  entry->commands.push_back(command);
  return success();
}

/// The region's ops are placed like the function's, on the same buffers;
/// the commands they produce form the graph.
LogicalResult ProgramBuilder::placeGraphRegion(GraphRegionOp region) {
  Block &body = region.getBody().front();
  for (auto [input, arg] : llvm::zip(region.getInputs(), body.getArguments())) {
    FailureOr<uint32_t> buffer = bufferFor(input);
    if (failed(buffer))
      return failure();
    buffers[arg] = *buffer;
  }
  GraphRegionDesc graph;
  graph.name = region.getName().str();
  graph.first = entry->commands.size();
  graph.shareIo = region.getShareIo();
  graph.forwardOnly = region.getForwardOnly();
  for (Operation &inner : body.without_terminator())
    if (failed(placeOp(&inner)))
      return failure();
  for (auto [result, yielded] :
       llvm::zip(region.getResults(), body.getTerminator()->getOperands())) {
    FailureOr<uint32_t> buffer = bufferFor(yielded);
    if (failed(buffer))
      return failure();
    buffers[result] = *buffer;
  }
  graph.count = entry->commands.size() - graph.first;
  if (graph.count > 0)
    entry->graphs.push_back(std::move(graph));
  return success();
}

/// The ancestor of `op` in `block`, or null.
static Operation *inBlock(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

/// The parameter read `value` is: a meg.param_ref, or a graph region's
/// argument bound to one.
static ParamRefOp paramRefOf(Value value) {
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

uint32_t ProgramBuilder::kernelIndex(func::FuncOp kernel, StringRef opName) {
  // Identical bodies and signatures share one kernel.
  kernel.setName("kernel");
  std::string key;
  llvm::raw_string_ostream os(key);
  kernel.print(os);
  auto [it, inserted] = kernelByBody.try_emplace(key, program.kernels.size());
  if (!inserted) {
    kernel.erase();
    return it->second;
  }
  std::string name =
      "megk" + std::to_string(program.kernels.size()) + "_" + opName.str();
  std::replace(name.begin(), name.end(), '.', '_');
  kernel.setName(name);
  // Results updated in place take no argument of their own.
  unsigned inPlace = 0;
  if (auto attr = kernel->getAttrOfType<DenseI64ArrayAttr>(kInPlaceAttrName))
    inPlace =
        llvm::count_if(attr.asArrayRef(), [](int64_t arg) { return arg >= 0; });
  program.kernels.push_back(
      {name, static_cast<uint32_t>(kernel.getNumArguments() +
                                   kernel.getNumResults() - inPlace)});
  return it->second;
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
  // identical work in every layer, and its recomputation, shares a kernel.
  kernel.walk([](Operation *inner) {
    inner->removeAttr(MegDialect::kLayerAttrName);
    inner->removeAttr(MegDialect::kRecomputedAttrName);
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
    kernel->setAttr(kInPlaceAttrName, builder.getDenseI64ArrayAttr(inPlace));

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

uint32_t ProgramBuilder::resultBuffer(Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  // A value the entry returns is computed into (the first of) its outputs,
  // which the ops that also read it read from there: nothing else writes
  // an output.
  std::optional<unsigned> output;
  for (OpOperand &use : result.getUses())
    if (auto ret = dyn_cast<func::ReturnOp>(use.getOwner());
        ret && ret->getBlock() == result.getParentBlock() &&
        (!output || use.getOperandNumber() < *output))
      output = use.getOperandNumber();
  if (output)
    return addBuffer(BufferKind::Output, *output, type);
  return addBuffer(BufferKind::Arena, 0, type);
}

bool ProgramBuilder::readAfter(StringRef param, Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  Block *top = &func.getBody().front();
  Operation *opTop = inBlock(top, op);
  // Whether `user` may run after `op` (ops of one block in order, graph
  // regions as a whole).
  auto runsAfter = [&](Operation *user) {
    if (user->getBlock() == op->getBlock())
      return user != op && !user->isBeforeInBlock(op);
    Operation *userTop = inBlock(top, user);
    return !userTop || userTop == opTop || !userTop->isBeforeInBlock(opTop);
  };
  bool after = false;
  // Every use of every read of the parameter, through views, graph region
  // arguments, and the waits of collectives that read it, must come before
  // `op`.
  std::function<void(Value)> visit = [&](Value value) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (auto region = dyn_cast<GraphRegionOp>(user)) {
        visit(region.getBody().front().getArgument(
            use.getOperandNumber() -
            region.getInputs().getBeginOperandIndex()));
        continue;
      }
      after |= runsAfter(user);
      auto collective = dyn_cast<CollectiveOpInterface>(user);
      if (isa<ReshapeOp>(user) || (collective && collective.isStarted()))
        visit(user->getResult(0));
    }
  };
  func.walk([&](ParamRefOp ref) {
    if (ref.getName() == param)
      visit(ref.getResult());
  });
  return after;
}

std::optional<uint32_t> ProgramBuilder::storedParameter(Operation *op,
                                                        Value result) {
  // The result may have other readers (the cast of an updated master
  // weight to the model's dtype): they read the parameter's storage, which
  // holds the new value from `op` on. Reshapes are views, and a graph
  // region's result is the value its body yields: the value they lead to is
  // the one stored.
  Value stored = result;
  while (stored.hasOneUse()) {
    OpOperand &use = *stored.getUses().begin();
    if (auto reshape = dyn_cast<ReshapeOp>(use.getOwner()))
      stored = reshape.getResult();
    else if (auto region =
                 dyn_cast<GraphRegionOp>(use.getOwner()->getParentOp());
             region && isa<YieldOp>(use.getOwner()))
      stored = region.getResult(use.getOperandNumber());
    else
      break;
  }
  ParamStoreOp store;
  for (Operation *user : stored.getUsers()) {
    auto candidate = dyn_cast<ParamStoreOp>(user);
    if (!candidate)
      continue;
    if (store)
      return std::nullopt;
    store = candidate;
  }
  if (!store || store->getParentOp() != op->getParentOfType<func::FuncOp>() ||
      !paramIndex.count(store.getName()) || readAfter(store.getName(), op))
    return std::nullopt;
  uint32_t param = paramIndex.lookup(store.getName());
  // A kernel that also reads the parameter would overwrite what it reads;
  // only the optimizer's elementwise update may (see placeKernel).
  for (Value operand : op->getOperands())
    if (ParamRefOp ref = paramRefOf(operand))
      if (ref.getName() == store.getName() && !isa<AdamWOp>(op))
        return std::nullopt;
  if (isa<FusionOp>(op)) {
    bool readsIt = false;
    op->walk(
        [&](ParamRefOp ref) { readsIt |= ref.getName() == store.getName(); });
    if (readsIt)
      return std::nullopt;
  }
  return param;
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t d : dims)
    result *= d;
  return result;
}

/// A product whose only reader is `meg.add` with a value that nothing else
/// reads (a gradient summed over the uses of a weight, over chunks or
/// micro-batches) is added into that value's buffer by the GEMM (C += A B):
/// no kernel, no second buffer. meg-fuse leaves such adds unfused
/// (isAccumulation).
bool ProgramBuilder::accumulateInto(Operation *product, GemmCommand &gemm) {
  Value result = product->getResult(0);
  auto add = result.hasOneUse() ? dyn_cast<AddOp>(*result.getUsers().begin())
                                : AddOp();
  if (!add || add->getBlock() != product->getBlock() ||
      add.getType() != result.getType())
    return false;
  Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
  auto placed = buffers.find(other);
  if (other == result || !other.hasOneUse() ||
      other.getType() != result.getType() || placed == buffers.end())
    return false;
  const BufferDesc &into = entry->buffers[placed->second];
  if (into.kind != BufferKind::Arena || into.aliasOf >= 0)
    return false;
  gemm.c = placed->second;
  gemm.accumulate = true;
  buffers[add.getResult()] = gemm.c;
  absorbed.insert(add);
  return true;
}

LogicalResult ProgramBuilder::placeLinear(LinearOp op) {
  auto input = cast<RankedTensorType>(op.getInput().getType());
  auto weight = cast<RankedTensorType>(op.getWeight().getType());
  FailureOr<uint32_t> a = bufferFor(op.getInput());
  FailureOr<uint32_t> b = bufferFor(op.getWeight());
  if (failed(a) || failed(b))
    return failure();
  GemmCommand gemm;
  gemm.a = *a;
  gemm.b = *b;
  if (Value bias = op.getBias()) {
    FailureOr<uint32_t> biasBuffer = bufferFor(bias);
    if (failed(biasBuffer))
      return failure();
    gemm.bias = *biasBuffer;
  }
  gemm.m = product(input.getShape().drop_back());
  gemm.k = input.getShape().back();
  gemm.n = weight.getDimSize(0);
  gemm.transB = true;
  if (!op.getBias() && accumulateInto(op, gemm)) {
    buffers[op.getResult()] = gemm.c;
    entry->commands.push_back(gemm);
    return success();
  }
  gemm.c = resultBuffer(op.getResult());
  buffers[op.getResult()] = gemm.c;
  // A tanh GELU that alone reads the product becomes the GEMM's epilogue
  // (cuBLASLt applies it in the matmul's epilogue; no kernel, no pass over
  // memory). In training the backward also reads the product, so it stays.
  if (op->hasOneUse())
    if (auto gelu = dyn_cast<GeluOp>(*op->user_begin()))
      if (gelu.getApproximate() == GeluApproximation::tanh &&
          gelu->getBlock() == op->getBlock()) {
        gemm.geluEpilogue = true;
        buffers[gelu.getResult()] = gemm.c;
        absorbed.insert(gelu);
      }
  entry->commands.push_back(gemm);
  return success();
}

LogicalResult ProgramBuilder::placeMatmul(MatmulOp op) {
  auto lhs = cast<RankedTensorType>(op.getLhs().getType());
  auto rhs = cast<RankedTensorType>(op.getRhs().getType());
  auto result = cast<RankedTensorType>(op.getType());
  FailureOr<uint32_t> a = bufferFor(op.getLhs());
  FailureOr<uint32_t> b = bufferFor(op.getRhs());
  if (failed(a) || failed(b))
    return failure();
  GemmCommand gemm;
  gemm.a = *a;
  gemm.b = *b;
  int64_t rank = result.getRank();
  gemm.m = result.getDimSize(rank - 2);
  gemm.n = result.getDimSize(rank - 1);
  gemm.k =
      op.getTransposeLhs() ? lhs.getDimSize(rank - 2) : lhs.getShape().back();
  gemm.transA = op.getTransposeLhs();
  gemm.transB = op.getTransposeRhs();
  gemm.batch = product(result.getShape().drop_back(2));
  gemm.strideA = gemm.m * gemm.k;
  gemm.strideB = rhs.getRank() > 2 ? gemm.k * gemm.n : 0;
  gemm.strideC = gemm.m * gemm.n;
  // Batches of rows times one matrix are one product of all the rows.
  if (gemm.batch > 1 && gemm.strideB == 0 && !gemm.transA) {
    gemm.m *= gemm.batch;
    gemm.batch = 1;
    gemm.strideA = gemm.strideC = 0;
  }
  if (!accumulateInto(op, gemm))
    gemm.c = resultBuffer(op.getResult());
  buffers[op.getResult()] = gemm.c;
  entry->commands.push_back(gemm);
  return success();
}

/// The table gradient as the runtime's scatter-add (EmbeddingGrad): each
/// row sums the gradient rows of its tokens in token order, after a stable
/// counting sort of the tokens by row in the command's scratch. Its work and
/// traffic are those of reading the gradient and writing the table once,
/// where a one-hot product would compare every token with every row.
LogicalResult ProgramBuilder::placeEmbeddingGrad(EmbeddingGradOp op) {
  auto table = cast<RankedTensorType>(op.getType());
  auto ids = cast<RankedTensorType>(op.getIds().getType());
  EmbeddingGradCommand command;
  command.vocab = table.getDimSize(0);
  command.dim = table.getDimSize(1);
  command.tokens = product(ids.getShape());
  // The runtime sorts with i32 offsets and token numbers.
  int64_t scratchElements =
      megrt::embeddingGradScratch(command.tokens, command.vocab).elements;
  if (scratchElements > megrt::kMaxEmbeddingGradScratch)
    return op.emitOpError()
           << "has " << command.tokens << " tokens and " << command.vocab
           << " rows: the runtime sorts them with i32 offsets, which needs "
              "vocab + 1 + 2 * tokens below 2^31";
  FailureOr<uint32_t> grad = bufferFor(op.getGrad());
  FailureOr<uint32_t> idsBuffer = bufferFor(op.getIds());
  if (failed(grad) || failed(idsBuffer))
    return failure();
  command.grad = *grad;
  command.ids = *idsBuffer;
  if (Value firstRow = op.getFirstRow()) {
    FailureOr<uint32_t> first = bufferFor(firstRow);
    if (failed(first))
      return failure();
    command.firstRow = static_cast<int32_t>(*first);
  }
  command.scratch =
      addBuffer(BufferKind::Arena, 0,
                RankedTensorType::get({scratchElements}, builder.getI32Type()));
  command.table = resultBuffer(op.getResult());
  buffers[op.getResult()] = command.table;
  entry->commands.push_back(command);
  return success();
}

} // namespace

FailureOr<ProgramDesc> buildProgram(ModuleOp module,
                                    const CompileOptions &options) {
  return ProgramBuilder(module, options).build();
}

uint64_t EntryDesc::flops(bool onlyRecomputed) const {
  double total = 0;
  for (auto [index, command] : llvm::enumerate(commands)) {
    if (onlyRecomputed && !(index < recomputed.size() && recomputed[index]))
      continue;
    if (const auto *gemm = std::get_if<GemmCommand>(&command)) {
      total +=
          2.0 * static_cast<double>(gemm->m) * gemm->n * gemm->k * gemm->batch;
    } else if (const auto *attention =
                   std::get_if<AttentionCommand>(&command)) {
      double forward = 2.0 * static_cast<double>(attention->batch) *
                       attention->heads * attention->seqQ * attention->seqKv *
                       (attention->headDim + attention->valueDim);
      if (attention->causal)
        forward /= 2;
      total += attention->backward ? 2.5 * forward : forward;
    }
  }
  return static_cast<uint64_t>(total);
}

} // namespace megc
