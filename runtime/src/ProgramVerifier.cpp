// Semantic verification of a structurally valid artifact.
#include "ProgramVerifier.h"

#include "AttentionCommand.h"

#include "Fail.h"
#include "FbTypes.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace megrt {
namespace {

void checkUniqueName(std::set<std::string> &seen, const std::string &name,
                     const std::string &what) {
  if (name.empty())
    fail(what, " has an empty name");
  if (!seen.insert(name).second)
    fail(what, ": name '", name, "' is used twice");
}

/// Byte size of dtype x shape, with the error naming `what`.
uint64_t checkedTensorBytes(fb::DType dtype,
                            const flatbuffers::Vector<int64_t> *shape,
                            const std::string &what) {
  if (!isValid(dtype))
    fail(what, ": invalid dtype value ", static_cast<int>(dtype));
  return byteSize(toDType(dtype), toShape(shape), what);
}

void verifyTensorSpecs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs,
    const std::string &what) {
  std::set<std::string> names;
  for (uint32_t i = 0; i < sizeOf(specs); ++i) {
    const fb::TensorSpec *spec = specs->Get(i);
    std::string where = concat(what, " ", i);
    checkUniqueName(names, toString(spec->name()), where);
    where = concat(what, " '", spec->name()->str(), "'");
    checkedTensorBytes(spec->dtype(), spec->shape(), where);
  }
}

/// A copy names another parameter of its shape that is not a copy itself;
/// no other kind names a source.
void verifyCopySource(const fb::Program &program, const fb::Parameter &param) {
  std::string where = concat("parameter '", param.name()->str(), "'");
  std::string source = toString(param.init_source());
  if (param.init_kind() != fb::InitKind::copy) {
    if (!source.empty())
      fail(where, ": init '", fb::EnumNameInitKind(param.init_kind()),
           "' names a source parameter '", source, "'");
    return;
  }
  if (!isFloatingPoint(toDType(param.dtype())))
    fail(where, ": a copy needs a floating-point dtype, found ",
         dtypeName(toDType(param.dtype())));
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i) {
    const fb::Parameter *from = program.parameters()->Get(i);
    if (toString(from->name()) != source)
      continue;
    if (toShape(from->shape()) != toShape(param.shape()))
      fail(where, ": copies '", source, "' of shape ",
           formatShape(toShape(from->shape())), " but has shape ",
           formatShape(toShape(param.shape())));
    if (from->init_kind() == fb::InitKind::copy)
      fail(where, ": copies '", source, "', which is itself a copy");
    if (!isFloatingPoint(toDType(from->dtype())))
      fail(where, ": copies '", source, "' of dtype ",
           dtypeName(toDType(from->dtype())));
    return;
  }
  fail(where, ": copies '", source, "', which is not a parameter");
}

void verifyParameter(const fb::Parameter &param, const std::string &where) {
  checkedTensorBytes(param.dtype(), param.shape(), where);
  if (!isValid(param.init_kind()))
    fail(where, ": invalid init kind value ",
         static_cast<int>(param.init_kind()));
  bool random = param.init_kind() == fb::InitKind::normal ||
                param.init_kind() == fb::InitKind::uniform;
  if (random && !isFloatingPoint(toDType(param.dtype())))
    fail(where, ": init '", fb::EnumNameInitKind(param.init_kind()),
         "' needs a floating-point dtype, found ",
         dtypeName(toDType(param.dtype())));
  if (random && !(std::isfinite(param.init_scale()) && param.init_scale() >= 0))
    fail(where, ": expected a finite non-negative init_scale, found ",
         param.init_scale());
  if (const fb::Sharding *sharding = param.sharding()) {
    int64_t rank = sizeOf(param.shape());
    if (sharding->dim() < 0 || sharding->dim() >= rank)
      fail(where, ": sharding dim ", sharding->dim(),
           " is out of range for rank ", rank);
    if (toString(sharding->mesh()).empty() || sizeOf(sharding->axes()) == 0)
      fail(where, ": sharding needs a mesh and at least one axis");
  }
}

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
                std::string where)
      : program_(program), entry_(entry), where_(std::move(where)) {}

  void verify() {
    verifyTensorSpecs(entry_.inputs(), where_ + ": input");
    verifyTensorSpecs(entry_.outputs(), where_ + ": output");
    verifyPlan();
    for (uint32_t i = 0; i < sizeOf(entry_.buffers()); ++i)
      verifyBuffer(i);
    for (uint32_t i = 0; i < sizeOf(entry_.commands()); ++i)
      verifyCommand(i);
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
    }
    fail(where, ": unknown operation type ",
         static_cast<int>(command->op_type()),
         " (written by a newer compiler?)");
  }

  /// Dimensions positive, heads a multiple of kv_heads, a floating-point
  /// dtype, and every operand a buffer of that dtype and exactly its size.
  void verifyAttention(const fb::Command &command, const std::string &where) {
    const fb::AttentionDims *dims =
        command.op_as_Attention() ? command.op_as_Attention()->dims()
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

  /// Devices run each region's commands as one graph among the others, so
  /// regions must be non-empty command ranges of the entry, in command
  /// order and disjoint.
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
  std::string where_;
  uint64_t arenaBytes_ = 0;
};

/// CUDA's limit on the threads of one block, on every architecture so far.
constexpr uint64_t kMaxThreadsPerBlock = 1024;

/// Returns the product of the dimensions, saturated at UINT64_MAX (three
/// 32-bit factors can exceed 64 bits).
uint64_t checkLaunchDims(const flatbuffers::Vector<uint32_t> *dims,
                         const char *name, const std::string &where) {
  if (sizeOf(dims) < 1 || sizeOf(dims) > 3)
    fail(where, ": ", name, " has ", sizeOf(dims),
         " dimensions, expected 1 to 3");
  uint64_t product = 1;
  for (uint32_t i = 0; i < dims->size(); ++i) {
    if (dims->Get(i) == 0)
      fail(where, ": ", name, " dimension ", i, " is 0");
    if (__builtin_mul_overflow(product, dims->Get(i), &product))
      product = UINT64_MAX;
  }
  return product;
}

void verifyCudaLaunch(const fb::CudaLaunch &launch, const fb::Kernel &kernel,
                      const std::string &where) {
  if (toString(launch.entry()).empty())
    fail(where, ": the CUDA entry name is empty");
  checkLaunchDims(launch.grid(), "grid", where);
  uint64_t threads = checkLaunchDims(launch.block(), "block", where);
  if (threads > kMaxThreadsPerBlock)
    fail(where, ": block of ", threads, " threads exceeds the CUDA limit of ",
         kMaxThreadsPerBlock);
  for (uint32_t i = 0; i < sizeOf(launch.args()); ++i) {
    const fb::CudaArg *arg = launch.args()->Get(i);
    if (!arg->scratch() && arg->value() >= kernel.num_args())
      fail(where, ": argument ", i, " refers to kernel argument ", arg->value(),
           ", but the kernel takes ", kernel.num_args());
    if (arg->scratch() && arg->value() >= kernel.cuda_scratch_bytes())
      fail(where, ": argument ", i, " points at scratch byte ", arg->value(),
           ", outside the kernel's ", kernel.cuda_scratch_bytes(),
           " scratch bytes");
  }
}

void verifyKernel(const fb::Kernel &kernel, bool hasCudaModule,
                  const std::string &where) {
  uint32_t numLaunches = sizeOf(kernel.cuda_launches());
  if (hasCudaModule && numLaunches == 0)
    fail(where, ": the program has a CUDA module, but the kernel has no CUDA "
                "launches");
  for (uint32_t i = 0; i < numLaunches; ++i)
    verifyCudaLaunch(*kernel.cuda_launches()->Get(i), kernel,
                     concat(where, ", CUDA launch ", i));
}

} // namespace

void verifyProgramSemantics(const fb::Program &program) {
  std::set<std::string> names;
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i) {
    const fb::Parameter *param = program.parameters()->Get(i);
    checkUniqueName(names, toString(param->name()), concat("parameter ", i));
    verifyParameter(*param, concat("parameter '", param->name()->str(), "'"));
  }
  for (uint32_t i = 0; i < sizeOf(program.parameters()); ++i)
    verifyCopySource(program, *program.parameters()->Get(i));

  names.clear();
  for (uint32_t i = 0; i < sizeOf(program.kernels()); ++i) {
    const fb::Kernel *kernel = program.kernels()->Get(i);
    checkUniqueName(names, toString(kernel->name()), concat("kernel ", i));
    verifyKernel(*kernel, program.cuda() != nullptr,
                 concat("kernel '", kernel->name()->str(), "'"));
  }

  names.clear();
  for (uint32_t i = 0; i < sizeOf(program.entries()); ++i) {
    const fb::Entry *entry = program.entries()->Get(i);
    checkUniqueName(names, toString(entry->name()), concat("entry ", i));
    EntryVerifier(program, *entry, concat("entry '", entry->name()->str(), "'"))
        .verify();
  }
}

} // namespace megrt
