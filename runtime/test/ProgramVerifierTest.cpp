// Semantic verification: each broken artifact gets the message that names it.
#include "ArtifactBuilder.h"
#include "SamplePrograms.h"
#include "megrt/Error.h"
#include "megrt/Program.h"

#include <functional>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

std::string errorAfter(const std::function<void(ProgramDesc &)> &breakIt) {
  ProgramDesc desc = linearProgram();
  breakIt(desc);
  try {
    Program::fromBytes(buildArtifact(desc));
  } catch (const Error &error) {
    return error.what();
  }
  return "(loaded)";
}

EntryDesc &forward(ProgramDesc &desc) { return desc.entries[0]; }
GemmDesc &gemmOf(ProgramDesc &desc) {
  return std::get<GemmDesc>(forward(desc).commands[kLinearGemmCommand]);
}

TEST(ProgramVerifier, AcceptsTheSample) {
  EXPECT_EQ(errorAfter([](ProgramDesc &) {}), "(loaded)");
}

TEST(ProgramVerifier, ParameterIndexOutOfRange) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { forward(d).buffers[1].index = 5; }),
            "entry 'forward', buffer 1: parameter index 5 is out of range "
            "(parameter count 2)");
}

TEST(ProgramVerifier, InputAndOutputIndexOutOfRange) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { forward(d).buffers[0].index = 1; }),
            "entry 'forward', buffer 0: input index 1 is out of range (input "
            "count 1)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { forward(d).buffers[4].index = 3; }),
            "entry 'forward', buffer 4: output index 3 is out of range "
            "(output count 1)");
}

/// The sample with an embedding_grad library call of 3 tokens into a 4 x 2
/// table appended to its forward entry (buffers after the sample's, in a
/// grown arena; operands grad 5, ids 6, first_row -1, table 7); `breakIt`
/// then changes it.
std::string embeddingGradErrorAfter(
    const std::function<void(EntryDesc &, LibraryCallDesc &)> &breakIt) {
  return errorAfter([&](ProgramDesc &d) {
    EntryDesc &entry = forward(d);
    uint64_t at = (entry.arenaBytes + 63) / 64 * 64;
    auto add = [&](fb::DType dtype, Shape shape, uint64_t bytes) {
      entry.buffers.push_back(
          {fb::BufferKind::arena, 0, at, dtype, std::move(shape), {}});
      at += (bytes + 63) / 64 * 64;
      return static_cast<int32_t>(entry.buffers.size() - 1);
    };
    LibraryCallDesc e{"embedding_grad", {}, {3, 4, 2}};
    e.operands.push_back(add(fb::DType::f32, {3, 2}, 24));
    e.operands.push_back(add(fb::DType::i32, {3}, 12));
    e.operands.push_back(-1);
    e.operands.push_back(add(fb::DType::f32, {4, 2}, 32));
    entry.arenaBytes = at;
    breakIt(entry, e);
    entry.commands.push_back(e);
  });
}

TEST(ProgramVerifier, AcceptsAnEmbeddingGradient) {
  EXPECT_EQ(embeddingGradErrorAfter([](EntryDesc &, LibraryCallDesc &) {}),
            "(loaded)");
}

TEST(ProgramVerifier, LibraryCallsFollowTheirKernelsSignature) {
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.name = "scatter"; }),
            "entry 'forward', command 2 (scatter): no library kernel is "
            "called 'scatter' (this runtime has embedding_grad; written by a "
            "newer compiler?)");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.name = "bad name"; }),
            "entry 'forward', command 2: the library kernel's name has a name "
            "with byte 0x20 at 3, which is not printable ASCII");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.operands.pop_back(); }),
            "entry 'forward', command 2 (embedding_grad): embedding_grad takes "
            "4 operands, the call passes 3");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.params.push_back(1); }),
            "entry 'forward', command 2 (embedding_grad): embedding_grad takes "
            "3 parameters, the call passes 4");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.operands[1] = -1; }),
            "entry 'forward', command 2 (embedding_grad): embedding_grad needs "
            "its operand ids");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.operands[0] = 99; }),
            "entry 'forward', command 2 (embedding_grad): grad buffer index 99 "
            "is out of range (buffer count 8)");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.operands[2] = -2; }),
            "entry 'forward', command 2 (embedding_grad): first_row buffer "
            "index -2 is out of range (buffer count 8)");
}

TEST(ProgramVerifier, EmbeddingGradientOperandsMustFitItsShape) {
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.params[1] = 5; }),
            "entry 'forward', command 2 (embedding_grad): table (buffer 7, "
            "f32[4,2]) is not 10 elements of f32 for embedding_grad f32 T=3 "
            "V=5 D=2");
  EXPECT_EQ(embeddingGradErrorAfter([](EntryDesc &entry, LibraryCallDesc &e) {
              entry.buffers[e.operands[1]].dtype = fb::DType::f32;
            }),
            "entry 'forward', command 2 (embedding_grad): ids (buffer 6, "
            "f32[3]) is not 3 elements of i32 or i64 for embedding_grad f32 "
            "T=3 V=4 D=2");
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.operands[2] = 6; }),
            "entry 'forward', command 2 (embedding_grad): first_row (buffer "
            "6, i32[3]) is not 1 elements of i32 for embedding_grad f32 T=3 "
            "V=4 D=2");
  EXPECT_EQ(embeddingGradErrorAfter([](EntryDesc &entry, LibraryCallDesc &e) {
              entry.buffers[e.operands[0]].dtype = fb::DType::bf16;
            }),
            "entry 'forward', command 2 (embedding_grad): grad (buffer 5, "
            "bf16[3,2]) is not 6 elements of f32 for embedding_grad f32 T=3 "
            "V=4 D=2");
}

TEST(ProgramVerifier, EmbeddingGradientNeedsPositiveSizesAndAFloatDType) {
  EXPECT_EQ(embeddingGradErrorAfter(
                [](EntryDesc &, LibraryCallDesc &e) { e.params[0] = 0; }),
            "entry 'forward', command 2 (embedding_grad): tokens 0, vocab 4 "
            "and dim 2 must be positive");
  EXPECT_EQ(embeddingGradErrorAfter([](EntryDesc &entry, LibraryCallDesc &e) {
              entry.buffers[e.operands[3]].dtype = fb::DType::i32;
            }),
            "entry 'forward', command 2 (embedding_grad): expected a "
            "floating-point table, found i32");
  EXPECT_EQ(embeddingGradErrorAfter([](EntryDesc &, LibraryCallDesc &e) {
              e.params[0] = int64_t{1} << 30;
            }),
            "entry 'forward', command 2 (embedding_grad): vocab 4 + 1 + 2 * "
            "tokens 1073741824 must stay below 2^31");
}

/// The sample with an attention of 2 queries and keys, 2 query heads on 1
/// KV head, dims 4, and its softmax statistics appended to its forward
/// entry (buffers after the sample's, in a grown arena); `breakIt` then
/// changes it.
std::string attentionStatsErrorAfter(
    const std::function<void(EntryDesc &, AttentionDesc &)> &breakIt) {
  return errorAfter([&](ProgramDesc &d) {
    EntryDesc &entry = forward(d);
    uint64_t at = (entry.arenaBytes + 63) / 64 * 64;
    auto add = [&](Shape shape, uint64_t bytes) {
      entry.buffers.push_back(
          {fb::BufferKind::arena, 0, at, fb::DType::f32, std::move(shape), {}});
      at += (bytes + 63) / 64 * 64;
      return static_cast<uint32_t>(entry.buffers.size() - 1);
    };
    AttentionDesc a;
    a.seqQ = a.seqKv = 2;
    a.heads = 2;
    a.headDim = a.valueDim = 4;
    a.causal = true;
    a.q = add({1, 2, 2, 4}, 64);
    a.k = add({1, 2, 1, 4}, 32);
    a.v = add({1, 2, 1, 4}, 32);
    a.out = add({1, 2, 2, 4}, 64);
    a.stats = static_cast<int32_t>(add({1, 2, 2}, 16));
    entry.arenaBytes = at;
    breakIt(entry, a);
    entry.commands.push_back(a);
  });
}

TEST(ProgramVerifier, AcceptsAttentionWithItsStatistics) {
  EXPECT_EQ(attentionStatsErrorAfter([](EntryDesc &, AttentionDesc &) {}),
            "(loaded)");
  EXPECT_EQ(attentionStatsErrorAfter(
                [](EntryDesc &, AttentionDesc &a) { a.stats = -1; }),
            "(loaded)");
}

TEST(ProgramVerifier, AttentionStatisticsMustFitTheShape) {
  EXPECT_EQ(attentionStatsErrorAfter([](EntryDesc &entry, AttentionDesc &a) {
              entry.buffers[static_cast<uint32_t>(a.stats)].shape = {1, 2};
            }),
            "entry 'forward', command 2 (attention): stats (buffer 9, "
            "f32[1,2]) is not 4 elements of f32 (batch x heads x seq_q) for "
            "attention f32 B=1 Sq=2 Skv=2 H=2 Hkv=1 D=4 Dv=4 causal");
  EXPECT_EQ(attentionStatsErrorAfter([](EntryDesc &entry, AttentionDesc &a) {
              entry.buffers[static_cast<uint32_t>(a.stats)].dtype =
                  fb::DType::i32;
            }),
            "entry 'forward', command 2 (attention): stats (buffer 9, "
            "i32[1,2,2]) is not 4 elements of f32 (batch x heads x seq_q) for "
            "attention f32 B=1 Sq=2 Skv=2 H=2 Hkv=1 D=4 Dv=4 causal");
  EXPECT_EQ(attentionStatsErrorAfter(
                [](EntryDesc &, AttentionDesc &a) { a.stats = -2; }),
            "entry 'forward', command 2 (attention): stats -2 is neither -1 "
            "nor a buffer");
  EXPECT_THAT(attentionStatsErrorAfter(
                  [](EntryDesc &, AttentionDesc &a) { a.stats = 99; }),
              HasSubstr("stats buffer index 99 is out of range"));
}

TEST(ProgramVerifier, GemmBufferIndexOutOfRange) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { gemmOf(d).a = 9; }),
            "entry 'forward', command 0 (gemm): A buffer index 9 is out of "
            "range (buffer count 5)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { gemmOf(d).bias = 5; }),
            "entry 'forward', command 0 (gemm): bias buffer index 5 is out of "
            "range (buffer count 5)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { gemmOf(d).bias = -2; }),
            "entry 'forward', command 0 (gemm): bias buffer index -2 is "
            "invalid (-1 means no bias)");
}

TEST(ProgramVerifier, GemmDimensionInconsistentWithOperand) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { gemmOf(d).k = 5; }),
            "entry 'forward', command 0 (gemm): operand A (buffer 0, "
            "f32[2,4]) has 8 elements, but m=2 n=3 k=5 batch=1 stride_a=0 "
            "need 10");
  EXPECT_THAT(errorAfter([](ProgramDesc &d) { gemmOf(d).n = 4; }),
              HasSubstr("operand B (buffer 1, f32[4,3]) has 12 elements, but "
                        "m=2 n=4 k=4 batch=1 stride_b=0 need 16"));
}

TEST(ProgramVerifier, GemmBatchStridesMustFitTheOperands) {
  // Broadcast A and B (stride 0) fit; C needs room for two batches.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              gemmOf(d).batch = 2;
              gemmOf(d).strideC = 6;
            }),
            "entry 'forward', command 0 (gemm): operand C (buffer 3, "
            "f32[2,3]) has 6 elements, but m=2 n=3 k=4 batch=2 stride_c=6 "
            "need 12");
}

TEST(ProgramVerifier, GemmBatchesOfCMustNotOverlap) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              gemmOf(d).batch = 2;
              gemmOf(d).strideC = 5;
            }),
            "entry 'forward', command 0 (gemm): stride_c 5 makes batches of C "
            "overlap (m*n = 6)");
}

TEST(ProgramVerifier, GemmNeedsPositiveDimensionsAndAFloatDType) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { gemmOf(d).m = 0; }),
            "entry 'forward', command 0 (gemm): expected positive m, n, k and "
            "batch, found m=0 n=3 k=4 batch=1");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { gemmOf(d).dtype = fb::DType::i32; }),
      "entry 'forward', command 0 (gemm): expected a floating-point "
      "dtype, found i32");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { gemmOf(d).strideA = -1; }),
            "entry 'forward', command 0 (gemm): expected non-negative "
            "strides, found stride_a=-1 stride_b=0 stride_c=0");
}

TEST(ProgramVerifier, GemmOperandDTypesMatch) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { gemmOf(d).dtype = fb::DType::bf16; }),
      "entry 'forward', command 0 (gemm): operand A has dtype f32, "
      "expected the gemm dtype bf16");
}

TEST(ProgramVerifier, GemmBiasHasNElements) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[1].shape = {4};
              forward(d).buffers[2].shape = {4};
            }),
            "entry 'forward', command 0 (gemm): bias (buffer 2, f32[4]) must "
            "have n=3 elements");
}

TEST(ProgramVerifier, GemmOutputMustNotAliasAnOperand) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              // A copied into the arena at 64..96, overlapping C at 64..88.
              forward(d).buffers.push_back(arenaBuffer(64, {2, 4}));
              gemmOf(d).a = 5;
            }),
            "entry 'forward', command 0 (gemm): output C overlaps operand A "
            "in memory; BLAS needs them distinct");
}

TEST(ProgramVerifier, ArenaBufferOutsideTheArena) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { forward(d).buffers[3].offset = 112; }),
      "entry 'forward', buffer 3: 24 bytes at offset 112 lie outside "
      "the arena of 128 bytes");
}

TEST(ProgramVerifier, ParameterViewOutsideTheParameter) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { forward(d).buffers[2].offset = 4; }),
      "entry 'forward', buffer 2: 12 bytes at offset 4 lie outside "
      "parameter 'b' of 12 bytes");
}

TEST(ProgramVerifier, BufferSizeMustMatchItsType) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { forward(d).buffers[3].sizeBytes = 20; }),
      "entry 'forward', buffer 3: size_bytes 20 does not match f32[2,3] "
      "(24 bytes)");
}

TEST(ProgramVerifier, BufferOffsetIsElementAligned) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { forward(d).buffers[3].offset = 66; }),
      "entry 'forward', buffer 3: offset 66 is not a multiple of the "
      "element size 4");
}

TEST(ProgramVerifier, BufferDTypeMatchesItsTensor) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).buffers[1].dtype = fb::DType::bf16;
            }),
            "entry 'forward', buffer 1: dtype bf16 differs from the dtype f32 "
            "of parameter 'w'");
}

TEST(ProgramVerifier, NegativeDimensions) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).inputs[0].shape = {-2, 4};
            }),
            "entry 'forward': input 'x': expected non-negative dimensions, "
            "found shape [-2,4]");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[0].shape = {4, -3};
            }),
            "parameter 'w': expected non-negative dimensions, found shape "
            "[4,-3]");
}

TEST(ProgramVerifier, NamesAreUniqueAndPresent) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[1].name = "w"; }),
            "parameter 1: name 'w' is used twice");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.entries[1].name = "forward"; }),
            "entry 1: name 'forward' is used twice");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).outputs.push_back({"y", fb::DType::f32, {1}});
            }),
            "entry 'forward': output 1: name 'y' is used twice");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[0].name = ""; }),
            "parameter 0 has an empty name");
  // Names are printable ASCII: a damaged byte never reaches a message raw.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[0].name = "w\x80"; }),
            "parameter 0 has a name with byte 0x80 at 1, which is not "
            "printable ASCII");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { forward(d).outputs[0].name = "lo ss"; }),
      "entry 'forward': output 0 has a name with byte 0x20 at 2, which "
      "is not printable ASCII");
}

TEST(ProgramVerifier, EnumValuesInRange) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[0].dtype = static_cast<fb::DType>(9);
            }),
            "parameter 'w': invalid dtype value 9");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[0].init = static_cast<fb::InitKind>(7);
            }),
            "parameter 'w': invalid init kind value 7");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).buffers[3].kind = static_cast<fb::BufferKind>(4);
            }),
            "entry 'forward', buffer 3: invalid buffer kind value 4");
}

TEST(ProgramVerifier, RandomInitNeedsAFloatDType) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params.push_back(
                  {"ids", fb::DType::i32, {4}, fb::InitKind::normal, 1.0});
            }),
            "parameter 'ids': init 'normal' needs a floating-point dtype, "
            "found i32");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[0].scale = -1.0; }),
            "parameter 'w': expected a finite non-negative init_scale, found "
            "-1");
}

TEST(ProgramVerifier, ShardedParameterIsOneDimensional) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.mesh = MeshDesc{"world", {{"dp", 2}}};
              d.submeshes = {{"dp"}};
              d.params[0].sharding = ShardingDesc{0, {8, 3}};
            }),
            "parameter 'w': sharding: a sharded parameter holds a piece of "
            "the flattened tensor and must be 1-D, found shape [4,3]");
}

TEST(ProgramVerifier, PlanPeakFitsTheArena) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { forward(d).peakBytes = 129; }),
            "entry 'forward': memory plan peak of 129 bytes exceeds its arena "
            "of 128 bytes");
}

TEST(ProgramVerifier, CopyStaysInsideItsBuffers) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              std::get<CopyDesc>(forward(d).commands[1]).bytes = 28;
            }),
            "entry 'forward', command 1 (copy): 28 bytes at offset 0 overrun "
            "the source buffer of 24 bytes");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              std::get<CopyDesc>(forward(d).commands[1]).dstOffset = 4;
            }),
            "entry 'forward', command 1 (copy): 24 bytes at offset 4 overrun "
            "the destination buffer of 24 bytes");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              std::get<CopyDesc>(forward(d).commands[1]).dst = 7;
            }),
            "entry 'forward', command 1 (copy): destination buffer index 7 is "
            "out of range (buffer count 5)");
}

TEST(ProgramVerifier, CommandNeedsAnOperation) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).commands.push_back(std::monostate{});
            }),
            "entry 'forward', command 2: command has no operation");
}

TEST(ProgramVerifier, KernelLaunchChecks) {
  auto withKernel = [](ProgramDesc &d, LaunchDesc launch) {
    d.kernels = {{"scale", "scale_cpu", 2}};
    forward(d).commands.push_back(launch);
  };
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) {
              withKernel(d, {0, {3}});
            }),
            "entry 'forward', command 2 (launch): kernel 'scale' takes 2 "
            "arguments, found 1");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) {
              withKernel(d, {1, {3, 4}});
            }),
            "entry 'forward', command 2 (launch): kernel index 1 is out of "
            "range (kernel count 1)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) {
              withKernel(d, {0, {3, 8}});
            }),
            "entry 'forward', command 2 (launch): argument 1 buffer index 8 "
            "is out of range (buffer count 5)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) {
              withKernel(d, {0, {3, 4}});
              d.kernels.push_back({"scale", "other", 1});
            }),
            "kernel 1: name 'scale' is used twice");
}

/// Kernel 'scale' (2 arguments, 64 scratch bytes) with one CUDA launch of
/// 'scale_f32' on both arguments and the scratch, in a program with a CUDA
/// module, launched by command 2 of "forward".
void addCudaKernel(ProgramDesc &d) {
  KernelDesc kernel{"scale", "scale_cpu", 2};
  kernel.cudaLaunches = {
      {"scale_f32", {2}, {32}, 0, {kernelArg(0), kernelArg(1), scratchArg(0)}}};
  kernel.cudaScratchBytes = 64;
  d.kernels = {kernel};
  d.cuda = CudaModuleDesc{"sm_90", "// PTX", {}};
  forward(d).commands.push_back(LaunchDesc{0, {3, 4}});
}

DispatchDesc &cudaLaunchOf(ProgramDesc &d) {
  return d.kernels[0].cudaLaunches[0];
}

TEST(ProgramVerifier, AcceptsCudaLaunches) {
  ProgramDesc desc = linearProgram();
  addCudaKernel(desc);
  Program program = Program::fromBytes(buildArtifact(desc));
  EXPECT_TRUE(program.hasCudaModule());
  ASSERT_EQ(program.kernels()[0].cuda.dispatches.size(), 1u);
  EXPECT_EQ(program.kernels()[0].cuda.dispatches[0].entry, "scale_f32");
  EXPECT_EQ(program.kernels()[0].cuda.dispatches[0].workgroups, 2u);
  EXPECT_EQ(program.kernels()[0].cuda.scratchBytes, 64u);
}

TEST(ProgramVerifier, CudaLaunchShapes) {
  const std::string where = "kernel 'scale', CUDA dispatch 0: ";
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).entry = "";
            }),
            where + "the entry name is empty");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).grid = {};
            }),
            where + "grid has 0 dimensions, expected 1 to 3");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).block = {1, 1, 1, 1};
            }),
            where + "block has 4 dimensions, expected 1 to 3");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).grid = {4, 0};
            }),
            where + "grid dimension 1 is 0");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).block = {32, 64};
            }),
            where + "block of 2048 threads exceeds the CUDA limit of 1024");
  // The product of three 32-bit dimensions overflows 64 bits.
  EXPECT_THAT(errorAfter([](ProgramDesc &d) {
                addCudaKernel(d);
                cudaLaunchOf(d).block = {0xffffffffu, 0xffffffffu, 0xffffffffu};
              }),
              HasSubstr("threads exceeds the CUDA limit of 1024"));
  // Large grids are the device's to refuse; 1024 threads is the limit.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).grid = {0x7fffffffu, 65535, 65535};
              cudaLaunchOf(d).block = {8, 8, 16};
            }),
            "(loaded)");
}

TEST(ProgramVerifier, CudaLaunchArguments) {
  const std::string where = "kernel 'scale', CUDA dispatch 0: ";
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).args[1] = kernelArg(2);
            }),
            where + "argument 1 refers to kernel argument 2, but the kernel "
                    "takes 2");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).args[2] = scratchArg(64);
            }),
            where + "argument 2 points at scratch byte 64, outside the "
                    "kernel's 64 scratch bytes");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              d.kernels[0].cudaScratchBytes = 0;
            }),
            where + "argument 2 points at scratch byte 0, outside the "
                    "kernel's 0 scratch bytes");
  // Scratch offsets need no particular alignment.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              cudaLaunchOf(d).args[2] = scratchArg(63);
            }),
            "(loaded)");
}

TEST(ProgramVerifier, CudaModuleNeedsLaunchesForEveryKernel) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              d.kernels.push_back({"cpu_only", "cpu_only", 0});
            }),
            "kernel 'cpu_only': the program has a CUDA module, but the kernel "
            "has no CUDA dispatches");
  // Without a CUDA module, kernels need no CUDA launches.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCudaKernel(d);
              d.kernels.push_back({"cpu_only", "cpu_only", 0});
              d.cuda.reset();
            }),
            "(loaded)");
}

TEST(ProgramVerifier, AcceptsGraphRegions) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"all", 0, 2, true, true}};
            }),
            "(loaded)");
  // Adjacent regions, and a name used in two entries.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"gemm", 0, 1}, {"copy", 1, 1}};
              d.entries[1].graphs = {{"copy", 0, 1}};
            }),
            "(loaded)");
}

TEST(ProgramVerifier, GraphRegionNeedsANameAndCommands) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"a", 0, 1}, {"", 1, 1}};
            }),
            "entry 'forward', graph region 1 has an empty name");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"g", 1, 0}};
            }),
            "entry 'forward', graph region 'g': expected at least one command, "
            "found 0");
}

TEST(ProgramVerifier, GraphRegionInsideTheEntry) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) {
        forward(d).graphs = {{"g", 1, 2}};
      }),
      "entry 'forward', graph region 'g': commands [1, 3) extend past the "
      "entry's 2 commands");
  // first + count overflows 32 bits.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"g", UINT32_MAX, 2}};
            }),
            "entry 'forward', graph region 'g': commands [4294967295, "
            "4294967297) extend past the entry's 2 commands");
}

TEST(ProgramVerifier, GraphRegionsInOrderAndDisjoint) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"a", 0, 2}, {"b", 1, 1}};
            }),
            "entry 'forward', graph region 'b': commands [1, 2) start before "
            "the end of the previous region 'a' at command 2; regions must "
            "be in command order and must not overlap");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              forward(d).graphs = {{"b", 1, 1}, {"a", 0, 1}};
            }),
            "entry 'forward', graph region 'a': commands [0, 1) start before "
            "the end of the previous region 'b' at command 2; regions must "
            "be in command order and must not overlap");
}

} // namespace
} // namespace megrt::test

namespace megrt::test {
namespace {

/// Kernel 'halve' with CPU code: a dispatch of 4 workgroups on both
/// arguments and 32 bytes of scratch, in a program with a CPU module,
/// launched by command 2 of "forward".
void addCpuKernel(ProgramDesc &d) {
  KernelDesc kernel{"halve", "", 2};
  kernel.cpuDispatches = {
      {"halve_d0_entry", {4}, {}, 0, {kernelArg(0), scratchArg(0)}},
      {"halve_d1_entry", {1}, {}, 0, {scratchArg(16), kernelArg(1)}}};
  kernel.cpuScratchBytes = 32;
  d.kernels = {kernel};
  d.cpuObject = std::vector<uint8_t>(16, 0);
  forward(d).commands.push_back(LaunchDesc{0, {3, 4}});
}

TEST(ProgramVerifier, CpuDispatches) {
  ProgramDesc desc = linearProgram();
  addCpuKernel(desc);
  Program program = Program::fromBytes(buildArtifact(desc));
  const KernelCodeSpec &cpu = program.kernels()[0].cpu;
  ASSERT_EQ(cpu.dispatches.size(), 2u);
  EXPECT_EQ(cpu.dispatches[0].entry, "halve_d0_entry");
  EXPECT_EQ(cpu.dispatches[0].workgroups, 4u);
  EXPECT_EQ(cpu.scratchBytes, 32u);
  EXPECT_TRUE(program.kernels()[0].cuda.dispatches.empty());

  const std::string where = "kernel 'halve', CPU dispatch ";
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCpuKernel(d);
              d.kernels[0].cpuDispatches[0].grid = {2, 2};
            }),
            where + "0: a CPU grid has one dimension of at most 4294967295 "
                    "workgroups");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCpuKernel(d);
              d.kernels[0].cpuDispatches[1].args[1] = kernelArg(2);
            }),
            where + "1: argument 1 refers to kernel argument 2, but the "
                    "kernel takes 2");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCpuKernel(d);
              d.kernels[0].cpuDispatches[1].args[0] = scratchArg(32);
            }),
            where + "1: argument 0 points at scratch byte 32, outside the "
                    "kernel's 32 scratch bytes");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addCpuKernel(d);
              d.kernels.push_back({"cuda_only", "", 0});
            }),
            "kernel 'cuda_only': the program has a CPU module, but the kernel "
            "has no CPU dispatches");
}

} // namespace
} // namespace megrt::test
