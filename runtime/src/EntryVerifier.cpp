// Semantic verification of one entry (EntryVerifier.h).
//
// Over 600 lines: one check per command kind (launch, GEMM, copy,
// attention, collective, wait, library call) against the entry's buffers
// and the lifetimes of its async collectives, which every check shares;
// the checks shared with program verification live in VerifierChecks.
#include "EntryVerifier.h"

#include "AttentionCommand.h"
#include "Fail.h"
#include "FbTypes.h"
#include "VerifierChecks.h"
#include "library/LibraryCall.h"
#include "megrt/Collectives.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace megrt {
namespace {

/// A buffer's bytes, and which storage (arena, or one parameter, input or
/// output) they are in, to detect aliasing between GEMM operands.
struct BufferExtent {
  fb::BufferKind kind;
  uint32_t index;
  uint64_t begin;
  uint64_t end;

  bool overlaps(const BufferExtent &other) const {
    bool sameStorage = kind == other.kind &&
                       (kind == fb::BufferKind::arena || index == other.index);
    return sameStorage && begin < other.end && other.begin < end;
  }
};

class EntryVerifier {
public:
  EntryVerifier(const fb::Program &program, const fb::Entry &entry,
                const MeshVerifier &mesh, std::string where)
      : program_(program), entry_(entry), mesh_(mesh),
        where_(std::move(where)) {}

  void verify() {
    verifyTensorSpecs(entry_.inputs(), /*isInput=*/true, mesh_,
                      where_ + ": input");
    verifyTensorSpecs(entry_.outputs(), /*isInput=*/false, mesh_,
                      where_ + ": output");
    verifyPlan();
    for (uint32_t i = 0; i < sizeOf(entry_.buffers()); ++i)
      verifyBuffer(i);
    for (uint32_t i = 0; i < sizeOf(entry_.commands()); ++i)
      verifyCommand(i);
    verifyWaited();
    verifyGraphRegions();
  }

private:
  void verifyPlan() {
    if (const fb::MemoryPlan *plan = entry_.plan()) {
      arenaBytes_ = plan->arena_bytes();
      if (plan->peak_bytes() > arenaBytes_)
        fail(where_, ": memory plan peak of ", plan->peak_bytes(),
             " bytes exceeds its arena of ", arenaBytes_, " bytes");
    }
  }

  /// The storage a buffer points into: its size in bytes and a description
  /// for messages. A non-arena buffer must have the dtype of its tensor.
  std::pair<uint64_t, std::string> storageOf(const fb::Buffer &buffer,
                                             const std::string &where) {
    auto tensorStorage = [&](fb::DType dtype,
                             const flatbuffers::Vector<int64_t> *shape,
                             const std::string &owner) {
      if (dtype != buffer.dtype())
        fail(where, ": dtype ", fb::EnumNameDType(buffer.dtype()),
             " differs from the dtype ", fb::EnumNameDType(dtype), " of ",
             owner);
      return std::pair{byteSize(toDType(dtype), toShape(shape), owner), owner};
    };
    auto outOfRange = [&](const char *what, uint32_t count) {
      fail(where, ": ", what, " index ", buffer.index(), " is out of range (",
           what, " count ", count, ")");
    };
    switch (buffer.kind()) {
    case fb::BufferKind::arena:
      return {arenaBytes_, "the arena"};
    case fb::BufferKind::parameter: {
      if (buffer.index() >= sizeOf(program_.parameters()))
        outOfRange("parameter", sizeOf(program_.parameters()));
      const fb::Parameter *param = program_.parameters()->Get(buffer.index());
      return tensorStorage(param->dtype(), param->shape(),
                           concat("parameter '", param->name()->str(), "'"));
    }
    case fb::BufferKind::input:
    case fb::BufferKind::output: {
      bool isInput = buffer.kind() == fb::BufferKind::input;
      auto *specs = isInput ? entry_.inputs() : entry_.outputs();
      if (buffer.index() >= sizeOf(specs))
        outOfRange(isInput ? "input" : "output", sizeOf(specs));
      const fb::TensorSpec *spec = specs->Get(buffer.index());
      return tensorStorage(
          spec->dtype(), spec->shape(),
          concat(isInput ? "input '" : "output '", spec->name()->str(), "'"));
    }
    }
    fail(where, ": invalid buffer kind value ",
         static_cast<int>(buffer.kind()));
  }

  void verifyBuffer(uint32_t index) {
    const fb::Buffer *buffer = entry_.buffers()->Get(index);
    std::string where = concat(where_, ", buffer ", index);
    if (!isValid(buffer->kind()))
      fail(where, ": invalid buffer kind value ",
           static_cast<int>(buffer->kind()));
    uint64_t expected =
        checkedTensorBytes(buffer->dtype(), buffer->shape(), where);
    if (buffer->size_bytes() != expected)
      fail(where, ": size_bytes ", buffer->size_bytes(), " does not match ",
           formatType(toDType(buffer->dtype()), toShape(buffer->shape())), " (",
           expected, " bytes)");
    size_t align = elementSize(toDType(buffer->dtype()));
    if (buffer->offset() % align != 0)
      fail(where, ": offset ", buffer->offset(),
           " is not a multiple of the element size ", align);
    auto [available, storage] = storageOf(*buffer, where);
    uint64_t end;
    if (__builtin_add_overflow(buffer->offset(), buffer->size_bytes(), &end) ||
        end > available)
      fail(where, ": ", buffer->size_bytes(), " bytes at offset ",
           buffer->offset(), " lie outside ", storage, " of ", available,
           " bytes");
  }

  const fb::Buffer &bufferAt(uint32_t index, const std::string &where,
                             const char *role) {
    uint32_t count = sizeOf(entry_.buffers());
    if (index >= count)
      fail(where, ": ", role, " buffer index ", index,
           " is out of range (buffer count ", count, ")");
    return *entry_.buffers()->Get(index);
  }

  void verifyCommand(uint32_t index) {
    const fb::Command *command = entry_.commands()->Get(index);
    std::string where = concat(where_, ", command ", index);
    // The FlatBuffers verifier accepts a union type without its table.
    if (command->op_type() != fb::CommandOp::NONE && !command->op())
      fail(where, ": operation type ", static_cast<int>(command->op_type()),
           " has no operation table");
    switch (command->op_type()) {
    case fb::CommandOp::NONE:
      fail(where, ": command has no operation");
    case fb::CommandOp::KernelLaunch:
      return verifyLaunch(*command->op_as_KernelLaunch(), where + " (launch)");
    case fb::CommandOp::Gemm:
      return verifyGemm(*command->op_as_Gemm(), where + " (gemm)");
    case fb::CommandOp::Copy:
      return verifyCopy(*command->op_as_Copy(), where + " (copy)");
    case fb::CommandOp::Attention:
    case fb::CommandOp::AttentionGrad:
      return verifyAttention(*command, where + " (attention)");
    case fb::CommandOp::Collective:
      return verifyCollective(*command->op_as_Collective(), index,
                              where + " (collective)");
    case fb::CommandOp::Wait:
      return verifyWait(*command->op_as_Wait(), index, where + " (wait)");
    case fb::CommandOp::LibraryCall:
      return verifyLibrary(*command->op_as_LibraryCall(), where);
    }
    fail(where, ": unknown operation type ",
         static_cast<int>(command->op_type()),
         " (written by a newer compiler?)");
  }

  /// Dimensions positive, heads a multiple of kv_heads, a floating-point
  /// dtype, and every operand a buffer of that dtype and exactly its size.
  void verifyAttention(const fb::Command &command, const std::string &where) {
    const fb::AttentionDims *dims = command.op_as_Attention()
                                        ? command.op_as_Attention()->dims()
                                        : command.op_as_AttentionGrad()->dims();
    fb::DType dtype = command.op_as_Attention()
                          ? command.op_as_Attention()->dtype()
                          : command.op_as_AttentionGrad()->dtype();
    if (!dims)
      fail(where, ": no dimensions");
    if (!isValid(dtype) || !isFloatingPoint(toDType(dtype)))
      fail(where, ": expected a floating-point dtype, found value ",
           static_cast<int>(dtype));
    AttentionOperands ops = *attentionOperands(command);
    const AttentionShape &s = ops.shape;
    if (s.batch < 1 || s.seqQ < 1 || s.seqKv < 1 || s.heads < 1 ||
        s.kvHeads < 1 || s.headDim < 1 || s.valueDim < 1 ||
        s.heads % s.kvHeads != 0)
      fail(where, ": invalid dimensions (", describeAttention(s),
           "): each must be positive and heads a multiple of kv_heads");
    if (!std::isfinite(s.scale))
      fail(where, ": scale ", s.scale, " is not finite");
    auto operand = [&](uint32_t index, const char *role,
                       std::initializer_list<int64_t> shape) {
      const fb::Buffer &buffer = bufferAt(index, where, role);
      int64_t want = 1;
      for (int64_t dim : shape)
        if (__builtin_mul_overflow(want, dim, &want))
          fail(where, ": ", role, " size overflows");
      if (buffer.dtype() != dtype ||
          numElements(toShape(buffer.shape()), where) != want)
        fail(where, ": ", role, " (buffer ", index, ", ",
             formatType(toDType(buffer.dtype()), toShape(buffer.shape())),
             ") is not ", want, " elements of ", dtypeName(toDType(dtype)),
             " for ", describeAttention(s));
    };
    operand(ops.q, "q", {s.batch, s.seqQ, s.heads, s.headDim});
    operand(ops.k, "k", {s.batch, s.seqKv, s.kvHeads, s.headDim});
    operand(ops.v, "v", {s.batch, s.seqKv, s.kvHeads, s.valueDim});
    operand(ops.out, "out", {s.batch, s.seqQ, s.heads, s.valueDim});
    if (ops.backward) {
      operand(ops.gradOut, "grad_out", {s.batch, s.seqQ, s.heads, s.valueDim});
      operand(ops.gradQ, "grad_q", {s.batch, s.seqQ, s.heads, s.headDim});
      operand(ops.gradK, "grad_k", {s.batch, s.seqKv, s.kvHeads, s.headDim});
      operand(ops.gradV, "grad_v", {s.batch, s.seqKv, s.kvHeads, s.valueDim});
    }
    if (ops.stats < -1)
      fail(where, ": stats ", ops.stats, " is neither -1 nor a buffer");
    if (ops.stats >= 0) {
      auto index = static_cast<uint32_t>(ops.stats);
      const fb::Buffer &buffer = bufferAt(index, where, "stats");
      if (buffer.dtype() != fb::DType::f32 ||
          numElements(toShape(buffer.shape()), where) !=
              attentionStatsElements(s))
        fail(where, ": stats (buffer ", index, ", ",
             formatType(toDType(buffer.dtype()), toShape(buffer.shape())),
             ") is not ", attentionStatsElements(s),
             " elements of f32 (batch x heads x seq_q) for ",
             describeAttention(s));
    }
    if (ops.positions < -1)
      fail(where, ": positions ", ops.positions, " is neither -1 nor a buffer");
    if (ops.positions >= 0) {
      auto index = static_cast<uint32_t>(ops.positions);
      const fb::Buffer &buffer = bufferAt(index, where, "positions");
      if (!s.causal)
        fail(where, ": query positions (buffer ", index,
             ") without the causal mask they place, for ",
             describeAttention(s));
      if (buffer.dtype() != fb::DType::i32 ||
          numElements(toShape(buffer.shape()), where) != s.seqQ)
        fail(where, ": positions (buffer ", index, ", ",
             formatType(toDType(buffer.dtype()), toShape(buffer.shape())),
             ") is not ", s.seqQ, " elements of i32 (seq_q) for ",
             describeAttention(s));
    }
  }

  /// What the kernel's signature says (libraryCallOf), then the kernel's
  /// own checks.
  void verifyLibrary(const fb::LibraryCall &call, std::string where) {
    std::string name = toString(call.name());
    checkPrintableName(name, where + ": the library kernel's name");
    where += concat(" (", name, ")");
    verifyLibraryCall(libraryCallOf(call, entry_, where), where);
  }

  void verifyLaunch(const fb::KernelLaunch &launch, const std::string &where) {
    uint32_t numKernels = sizeOf(program_.kernels());
    if (launch.kernel() >= numKernels)
      fail(where, ": kernel index ", launch.kernel(),
           " is out of range (kernel count ", numKernels, ")");
    const fb::Kernel *kernel = program_.kernels()->Get(launch.kernel());
    uint32_t numArgs = sizeOf(launch.args());
    if (numArgs != kernel->num_args())
      fail(where, ": kernel '", kernel->name()->str(), "' takes ",
           kernel->num_args(), " arguments, found ", numArgs);
    for (uint32_t i = 0; i < numArgs; ++i)
      bufferAt(launch.args()->Get(i), where, concat("argument ", i).c_str());
  }

  /// Elements an operand spans: (batch - 1) * stride + rows * cols, which must
  /// equal the operand buffer's element count exactly.
  void checkGemmOperand(const fb::Buffer &buffer, uint32_t index,
                        const char *role, int64_t rows, int64_t cols,
                        int64_t batch, int64_t stride, const char *strideName,
                        const fb::Gemm &gemm, const std::string &where) {
    int64_t matrix, span, needed;
    if (__builtin_mul_overflow(rows, cols, &matrix) ||
        __builtin_mul_overflow(batch - 1, stride, &span) ||
        __builtin_add_overflow(span, matrix, &needed))
      fail(where, ": operand ", role, " size overflows");
    int64_t found = numElements(toShape(buffer.shape()), where);
    if (found != needed)
      fail(where, ": operand ", role, " (buffer ", index, ", ",
           formatType(toDType(buffer.dtype()), toShape(buffer.shape())),
           ") has ", found, " elements, but m=", gemm.m(), " n=", gemm.n(),
           " k=", gemm.k(), " batch=", batch, " ", strideName, "=", stride,
           " need ", needed);
  }

  void verifyGemm(const fb::Gemm &gemm, const std::string &where) {
    if (!isValid(gemm.dtype()))
      fail(where, ": invalid dtype value ", static_cast<int>(gemm.dtype()));
    if (!isValid(gemm.epilogue()))
      fail(where, ": invalid epilogue value ",
           static_cast<int>(gemm.epilogue()));
    if (!isFloatingPoint(toDType(gemm.dtype())))
      fail(where, ": expected a floating-point dtype, found ",
           dtypeName(toDType(gemm.dtype())));
    if (gemm.m() < 1 || gemm.n() < 1 || gemm.k() < 1 || gemm.batch() < 1)
      fail(where, ": expected positive m, n, k and batch, found m=", gemm.m(),
           " n=", gemm.n(), " k=", gemm.k(), " batch=", gemm.batch());
    if (gemm.stride_a() < 0 || gemm.stride_b() < 0 || gemm.stride_c() < 0)
      fail(where,
           ": expected non-negative strides, found stride_a=", gemm.stride_a(),
           " stride_b=", gemm.stride_b(), " stride_c=", gemm.stride_c());
    // Batches of C must not share elements: each would overwrite the other.
    int64_t matrixC;
    if (__builtin_mul_overflow(gemm.m(), gemm.n(), &matrixC))
      fail(where, ": m*n overflows");
    if (gemm.batch() > 1 && gemm.stride_c() < matrixC)
      fail(where, ": stride_c ", gemm.stride_c(),
           " makes batches of C overlap (m*n = ", matrixC, ")");

    const fb::Buffer &a = bufferAt(gemm.a(), where, "A");
    const fb::Buffer &b = bufferAt(gemm.b(), where, "B");
    const fb::Buffer &c = bufferAt(gemm.c(), where, "C");
    std::vector<std::pair<const fb::Buffer *, const char *>> operands = {
        {&a, "A"}, {&b, "B"}, {&c, "C"}};
    const fb::Buffer *bias = nullptr;
    if (gemm.bias() < -1)
      fail(where, ": bias buffer index ", gemm.bias(),
           " is invalid (-1 means no bias)");
    if (gemm.bias() >= 0) {
      bias = &bufferAt(static_cast<uint32_t>(gemm.bias()), where, "bias");
      operands.push_back({bias, "bias"});
    }
    for (auto [buffer, role] : operands)
      if (buffer->dtype() != gemm.dtype())
        fail(where, ": operand ", role, " has dtype ",
             fb::EnumNameDType(buffer->dtype()), ", expected the gemm dtype ",
             fb::EnumNameDType(gemm.dtype()));

    checkGemmOperand(a, gemm.a(), "A", gemm.m(), gemm.k(), gemm.batch(),
                     gemm.stride_a(), "stride_a", gemm, where);
    checkGemmOperand(b, gemm.b(), "B", gemm.k(), gemm.n(), gemm.batch(),
                     gemm.stride_b(), "stride_b", gemm, where);
    checkGemmOperand(c, gemm.c(), "C", gemm.m(), gemm.n(), gemm.batch(),
                     gemm.stride_c(), "stride_c", gemm, where);
    if (bias && numElements(toShape(bias->shape()), where) != gemm.n())
      fail(where, ": bias (buffer ", gemm.bias(), ", ",
           formatType(toDType(bias->dtype()), toShape(bias->shape())),
           ") must have n=", gemm.n(), " elements");

    BufferExtent cExtent = extentOf(c);
    for (auto [buffer, role] : operands)
      if (buffer != &c && cExtent.overlaps(extentOf(*buffer)))
        fail(where, ": output C overlaps operand ", role,
             " in memory; BLAS needs them distinct");
  }

  /// Buffers of the collective's dtype, large enough for `count` elements
  /// on this rank (times the group size for an all_gather's destination and
  /// the source of a reduce_scatter or a slice); reductions on
  /// floating-point dtypes only; source and destination disjoint, except an
  /// all_reduce in place.
  void verifyCollective(const fb::Collective &collective, uint32_t index,
                        const std::string &where) {
    const CollectiveInfo *info = findCollective(toString(collective.kind()));
    if (!info)
      fail(where, ": unknown collective '", toString(collective.kind()),
           "' (megrt/Collectives.def lists the ones this runtime runs)");
    if (!isValid(collective.reduce()))
      fail(where, ": invalid reduce value ",
           static_cast<int>(collective.reduce()));
    if (!isValid(collective.dtype()))
      fail(where, ": invalid dtype value ",
           static_cast<int>(collective.dtype()));
    const char *name = info->name;
    if (static_cast<int>(sizeOf(collective.params())) != info->params)
      fail(where, ": the ", name, " takes ", info->params,
           " integer parameter(s), the command has ",
           sizeOf(collective.params()));
    DType dtype = toDType(collective.dtype());
    int64_t group = mesh_.groupSize(collective.submesh(), where);
    if (info->form == CollectiveForm::Send ||
        info->form == CollectiveForm::Receive)
      verifyTransfer(collective, index, group, where);
    if (info->reduces && !isFloatingPoint(dtype))
      fail(where, ": ", name,
           " reduces, which needs a floating-point dtype, "
           "found ",
           dtypeName(dtype));

    uint64_t count = collective.count();
    uint64_t groupCount;
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(group),
                               &groupCount) ||
        groupCount > static_cast<uint64_t>(INT64_MAX) / elementSize(dtype))
      fail(where, ": count ", count, " x ", group, " ranks overflows");
    uint64_t srcCount = info->sourceWhole ? groupCount : count;
    uint64_t dstCount = info->destinationWhole ? groupCount : count;
    std::string what = concat(name, " of ", count, " ", dtypeName(dtype),
                              " elements per rank over ",
                              mesh_.describeSubmesh(collective.submesh()));
    BufferExtent used[2];
    for (int i = 0; i < 2; ++i) {
      bool isSrc = i == 0;
      uint32_t bufferIndex = isSrc ? collective.src() : collective.dst();
      const char *role = isSrc ? "source" : "destination";
      const fb::Buffer &buffer = bufferAt(bufferIndex, where, role);
      std::string described = concat(
          role, " (buffer ", bufferIndex, ", ",
          formatType(toDType(buffer.dtype()), toShape(buffer.shape())), ")");
      if (buffer.dtype() != collective.dtype())
        fail(where, ": ", described, " does not have the collective's dtype ",
             dtypeName(dtype));
      uint64_t needed = isSrc ? srcCount : dstCount;
      auto found =
          static_cast<uint64_t>(numElements(toShape(buffer.shape()), where));
      if (found < needed)
        fail(where, ": the ", what, " needs ", needed, " elements in its ",
             described, ", which has ", found);
      used[i] = extentOf(buffer);
      used[i].end = used[i].begin + needed * elementSize(dtype);
    }
    bool inPlace = used[0].begin == used[1].begin && used[0].overlaps(used[1]);
    if (used[0].overlaps(used[1]) && !(inPlace && info->inPlace))
      fail(where, ": source and destination of the ", name,
           " overlap in memory; only an all_reduce may run in place (same "
           "address)");
    if (collective.async())
      waitedBy_[index] = -1;
  }

  /// A send's or receive's peer is a rank of its group; a batch's
  /// transfers (params[1], params[2] of them) are async, on one group, and
  /// all issued before any of them is waited for (verifyWait) and before
  /// the entry ends (verifyWaited).
  void verifyTransfer(const fb::Collective &collective, uint32_t index,
                      int64_t group, const std::string &where) {
    const auto &params = *collective.params();
    if (params[0] < 0 || params[0] >= group)
      fail(where, ": peer ", params[0], " is not a rank of its ", group,
           "-rank group");
    int64_t batch = params[1], size = params[2];
    if (size == 1 && batch == -1)
      return;
    if (size < 2 || batch < 0)
      fail(where, ": batch ", batch, " of ", size,
           " transfers; a transfer alone is batch -1 of 1, a batch has "
           "an index >= 0 and two transfers or more");
    if (!collective.async())
      fail(where, ": a batched transfer must be async (its batch starts "
                  "with its last transfer)");
    TransferBatch &seen = batches_[batch];
    if (seen.issued == 0) {
      seen.size = size;
      seen.submesh = collective.submesh();
    }
    if (seen.size != size || seen.submesh != collective.submesh())
      fail(where, ": batch ", batch, " was of ", seen.size,
           " transfers on submesh ", seen.submesh, ", here of ", size,
           " on submesh ", collective.submesh());
    if (++seen.issued > seen.size)
      fail(where, ": batch ", batch, " has more than its ", seen.size,
           " transfers");
    batchOf_[index] = batch;
  }

  /// Each async collective is completed by exactly one later Wait.
  void verifyWait(const fb::Wait &wait, uint32_t index,
                  const std::string &where) {
    uint32_t target = wait.collective();
    if (target >= index)
      fail(where, ": waits for command ", target,
           ", which is not an earlier command");
    const fb::Collective *collective =
        entry_.commands()->Get(target)->op_as_Collective();
    if (!collective || !collective->async())
      fail(where, ": waits for command ", target,
           ", which is not an async collective");
    if (auto batch = batchOf_.find(target); batch != batchOf_.end()) {
      const TransferBatch &seen = batches_.at(batch->second);
      if (seen.issued < seen.size)
        fail(where, ": waits for command ", target, " of transfer batch ",
             batch->second, " before its ", seen.size - seen.issued,
             " remaining transfer(s) are issued (the batch starts with its "
             "last)");
    }
    int64_t &waitedBy = waitedBy_.at(target);
    if (waitedBy >= 0)
      fail(where, ": command ", target, " was already waited for by command ",
           waitedBy);
    waitedBy = index;
  }

  void verifyWaited() {
    for (const auto &[batch, seen] : batches_)
      if (seen.issued < seen.size)
        fail(where_, ": transfer batch ", batch, " has ", seen.issued,
             " of its ", seen.size, " transfers");
    for (auto [collective, waitedBy] : waitedBy_)
      if (waitedBy < 0)
        fail(
            where_, ", command ", collective, " (collective): the async ",
            toString(
                entry_.commands()->Get(collective)->op_as_Collective()->kind()),
            " is never waited for; the entry must end with no collective "
            "pending");
  }

  /// Devices run each region's commands as one graph among the others, so
  /// regions must be non-empty command ranges of the entry, in command
  /// order and disjoint. A collective may be inside one (CUDA captures
  /// NCCL's); an async one is waited for in its own region, where the
  /// graph's stream orders the two, and a Wait inside a region completes a
  /// collective of that region.
  void verifyGraphRegions() {
    uint64_t numCommands = sizeOf(entry_.commands());
    uint64_t previousEnd = 0;
    std::string previous;
    for (uint32_t i = 0; i < sizeOf(entry_.graphs()); ++i) {
      const fb::GraphRegion *region = entry_.graphs()->Get(i);
      std::string name = toString(region->name());
      if (name.empty())
        fail(where_, ", graph region ", i, " has an empty name");
      std::string where = concat(where_, ", graph region '", name, "'");
      if (region->num_commands() == 0)
        fail(where, ": expected at least one command, found 0");
      // In 64 bits, first + num cannot overflow.
      uint64_t first = region->first_command();
      uint64_t end = first + region->num_commands();
      if (end > numCommands)
        fail(where, ": commands [", first, ", ", end,
             ") extend past the entry's ", numCommands, " commands");
      if (first < previousEnd)
        fail(where, ": commands [", first, ", ", end,
             ") start before the end of the previous region '", previous,
             "' at command ", previousEnd,
             "; regions must be in command order and must not overlap");
      auto inside = [&](uint64_t c) { return c >= first && c < end; };
      for (uint64_t c = first; c < end; ++c) {
        const fb::Command &command = *entry_.commands()->Get(c);
        if (const fb::Wait *wait = command.op_as_Wait()) {
          if (!inside(wait->collective()))
            fail(where, ": command ", c, " (wait) completes command ",
                 wait->collective(),
                 ", which is outside the region; an "
                 "async collective and its wait must be in one region");
        } else if (const fb::Collective *collective =
                       command.op_as_Collective()) {
          auto waited = waitedBy_.find(static_cast<uint32_t>(c));
          if (collective->async() && waited != waitedBy_.end() &&
              !inside(static_cast<uint64_t>(waited->second)))
            fail(where, ": command ", c,
                 " (async collective) is waited for "
                 "by command ",
                 waited->second,
                 ", which is outside the "
                 "region; an async collective and its wait must be in one "
                 "region");
        }
      }
      previousEnd = end;
      previous = name;
    }
  }

  static BufferExtent extentOf(const fb::Buffer &buffer) {
    return {buffer.kind(), buffer.index(), buffer.offset(),
            buffer.offset() + buffer.size_bytes()};
  }

  void verifyCopy(const fb::Copy &copy, const std::string &where) {
    const fb::Buffer &src = bufferAt(copy.src(), where, "source");
    const fb::Buffer &dst = bufferAt(copy.dst(), where, "destination");
    for (auto [buffer, offset, role] :
         {std::tuple{&src, copy.src_offset(), "source"},
          std::tuple{&dst, copy.dst_offset(), "destination"}}) {
      uint64_t end;
      if (__builtin_add_overflow(offset, copy.bytes(), &end) ||
          end > buffer->size_bytes())
        fail(where, ": ", copy.bytes(), " bytes at offset ", offset,
             " overrun the ", role, " buffer of ", buffer->size_bytes(),
             " bytes");
    }
  }

  const fb::Program &program_;
  const fb::Entry &entry_;
  const MeshVerifier &mesh_;
  std::string where_;
  uint64_t arenaBytes_ = 0;
  /// Per async collective (by command index), the Wait that completes it,
  /// or -1 while none has.
  std::map<uint32_t, int64_t> waitedBy_;
  struct TransferBatch {
    int64_t size = 0, issued = 0;
    uint32_t submesh = 0;
  };
  std::map<int64_t, TransferBatch> batches_;
  /// Per batched transfer (command index), its batch.
  std::map<uint32_t, int64_t> batchOf_;
};

} // namespace

void verifyEntry(const fb::Program &program, const fb::Entry &entry,
                 const MeshVerifier &mesh, const std::string &where) {
  EntryVerifier(program, entry, mesh, where).verify();
}

} // namespace megrt
