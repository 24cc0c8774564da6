//===- LibraryCalls.cpp - the runtime's own commands ---===//
//
// Ops the runtime carries out with its own commands instead of generated
// kernels: matrix products as GEMMs (bias and accumulation epilogues
// absorbed), fused attention and its gradient, collectives with their
// waits, and the calls of library kernels (the embedding gradient's
// scatter-add), one pattern each.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

#include "llvm/ADT/TypeSwitch.h"

namespace megc {

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
  auto collective = cast<CollectiveOpInterface>(op);
  if (isa<SendStartOp, RecvStartOp>(op))
    return placeTransfer(op);
  auto input = op->getOperand(0);
  auto inputType = cast<RankedTensorType>(input.getType());
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
          [&](auto) { command.kind = CollectiveCommand::Kind::AllToAll; })
      .Case<ShiftOp, ShiftStartOp>([&](auto shift) {
        command.kind = CollectiveCommand::Kind::Shift;
        command.params = {static_cast<int64_t>(shift.getOffset())};
      });
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
  // count is what the collective's table line calls one piece: the
  // buffer that holds one (the source, else the destination), or the
  // destination's share of each rank of the group.
  const megrt::CollectiveInfo &info = megrt::collectiveInfo(command.kind);
  command.count = !info.sourceWhole ? inputType.getNumElements()
                                    : producedType.getNumElements();
  if (info.destinationWhole) {
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

/// One side of a point-to-point transfer: a send moves its input's buffer
/// (src and dst both), a receive fills a new one; each is waited for by a
/// meg.wait, which yields the sent input or the received tensor.
LogicalResult ProgramBuilder::placeTransfer(Operation *op) {
  auto send = dyn_cast<SendStartOp>(op);
  auto recv = dyn_cast<RecvStartOp>(op);
  auto mesh = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  FailureOr<uint32_t> group = submeshIndex(op, mesh, axes);
  if (failed(group))
    return failure();
  RankedTensorType type = cast<CollectiveOpInterface>(op).getProducedType();
  CollectiveCommand command{};
  command.kind =
      send ? CollectiveCommand::Kind::Send : CollectiveCommand::Kind::Recv;
  command.submesh = *group;
  // The peer, and the batch with its size (-1 and 1 alone): the runtime
  // starts a batch's transfers together.
  std::optional<int64_t> batch = send ? send.getBatch() : recv.getBatch();
  int64_t batchSize = 1;
  if (batch) {
    batchSize = 0;
    op->getParentOfType<func::FuncOp>()->walk([&](Operation *other) {
      auto otherSend = dyn_cast<SendStartOp>(other);
      auto otherRecv = dyn_cast<RecvStartOp>(other);
      if ((otherSend && otherSend.getBatch() == batch) ||
          (otherRecv && otherRecv.getBatch() == batch))
        ++batchSize;
    });
  }
  command.params = {send ? send.getPeer() : recv.getPeer(),
                    batch && batchSize > 1 ? *batch : -1,
                    batch && batchSize > 1 ? batchSize : 1};
  if (send) {
    FailureOr<uint32_t> src = bufferFor(send.getInput());
    if (failed(src))
      return failure();
    command.src = command.dst = *src;
  } else {
    command.src = command.dst = addBuffer(BufferKind::Arena, 0, type);
  }
  command.count = type.getNumElements();
  command.async = true;
  started[op->getResult(0)] = WaitCommand{
      static_cast<uint32_t>(entry->commands.size()), command.src, command.dst};
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
  Value positions = forward ? forward.getPositions() : backward.getPositions();
  if (positions)
    reads.push_back(positions);
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
  if (positions)
    command.positions = static_cast<int32_t>(in.back());
  entry->commands.push_back(command);
  return success();
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

FailureOr<int32_t> ProgramBuilder::callOperand(Value value) {
  if (!value)
    return -1;
  FailureOr<uint32_t> buffer = bufferFor(value);
  if (failed(buffer))
    return failure();
  return static_cast<int32_t>(*buffer);
}

int32_t ProgramBuilder::callResult(Value result) {
  uint32_t buffer = resultBuffer(result);
  buffers[result] = buffer;
  return static_cast<int32_t>(buffer);
}

namespace {

/// The table gradient as the runtime's library kernel embedding_grad (a
/// deterministic scatter-add): each row sums the gradient rows of its tokens
/// in token order. Its work and traffic are those of reading the gradient
/// and writing the table once, where a one-hot product would compare every
/// token with every row.
FailureOr<LibraryCallCommand> embeddingGradCall(EmbeddingGradOp op,
                                                ProgramBuilder &builder) {
  auto table = cast<RankedTensorType>(op.getType());
  auto ids = cast<RankedTensorType>(op.getIds().getType());
  FailureOr<int32_t> grad = builder.callOperand(op.getGrad());
  FailureOr<int32_t> idsBuffer = builder.callOperand(op.getIds());
  FailureOr<int32_t> firstRow = builder.callOperand(op.getFirstRow());
  if (failed(grad) || failed(idsBuffer) || failed(firstRow))
    return failure();
  // Operands and parameters in the order of megrt/LibraryKernels.def.
  return LibraryCallCommand{
      "embedding_grad",
      {*grad, *idsBuffer, *firstRow, builder.callResult(op.getResult())},
      {product(ids.getShape()), table.getDimSize(0), table.getDimSize(1)}};
}

/// A library pattern: the call of `op`, or std::nullopt for an op it does
/// not match.
using LibraryPattern = std::optional<FailureOr<LibraryCallCommand>> (*)(
    Operation *op, ProgramBuilder &builder);

template <typename Op,
          FailureOr<LibraryCallCommand> (*Call)(Op, ProgramBuilder &)>
std::optional<FailureOr<LibraryCallCommand>> match(Operation *op,
                                                   ProgramBuilder &builder) {
  if (auto typed = dyn_cast<Op>(op))
    return Call(typed, builder);
  return std::nullopt;
}

/// One pattern per op that a library kernel (megrt/LibraryKernels.def)
/// carries out: a new kernel adds its function above and its line here.
constexpr LibraryPattern kLibraryPatterns[] = {
    match<EmbeddingGradOp, embeddingGradCall>,
};

} // namespace

std::optional<LogicalResult> ProgramBuilder::placeLibraryCall(Operation *op) {
  for (LibraryPattern pattern : kLibraryPatterns)
    if (std::optional<FailureOr<LibraryCallCommand>> call =
            pattern(op, *this)) {
      if (failed(*call))
        return failure();
      entry->commands.push_back(std::move(**call));
      return success();
    }
  return std::nullopt;
}

} // namespace megc
