// Small valid programs that tests load as they are or break on purpose.
#include "SamplePrograms.h"

#include "TestFiles.h"

namespace megrt::test {

ProgramDesc linearProgram() {
  ProgramDesc program;
  program.params = {
      {"w", fb::DType::f32, {4, 3}, fb::InitKind::normal, 0.02},
      {"b", fb::DType::f32, {3}, fb::InitKind::zeros, 0.0},
  };

  EntryDesc forward;
  forward.name = "forward";
  forward.inputs = {{"x", fb::DType::f32, {2, 4}}};
  forward.outputs = {{"y", fb::DType::f32, {2, 3}}};
  forward.buffers = {inputBuffer(0, {2, 4}), paramBuffer(0, {4, 3}),
                     paramBuffer(1, {3}), arenaBuffer(64, {2, 3}),
                     outputBuffer(0, {2, 3})};
  GemmDesc gemm;
  gemm.a = 0;
  gemm.b = 1;
  gemm.c = 3;
  gemm.bias = 2;
  gemm.m = 2;
  gemm.n = 3;
  gemm.k = 4;
  forward.commands = {gemm, CopyDesc{3, 4, 0, 0, 24}};
  forward.arenaBytes = 128;
  forward.peakBytes = 24;
  forward.unplannedBytes = 24;

  EntryDesc identity;
  identity.name = "identity";
  identity.inputs = {{"x", fb::DType::f32, {2, 4}}};
  identity.outputs = {{"y", fb::DType::f32, {2, 4}}};
  identity.buffers = {inputBuffer(0, {2, 4}), outputBuffer(0, {2, 4})};
  identity.commands = {CopyDesc{0, 1, 0, 0, 32}};

  program.entries = {forward, identity};
  return program;
}

ProgramDesc testKernelsProgram(const char *kernelsPath) {
  ProgramDesc program;
  program.cpuObject = readBytes(kernelsPath);
#if defined(__aarch64__)
  program.targetTriple = "aarch64-unknown-linux-gnu";
#else
  program.targetTriple = "x86_64-unknown-linux-gnu";
#endif
  program.kernels = {{"add", "add_constant", 2},
                     {"mul", "multiply", 3},
                     {"exp", "exponential", 2}};
  return program;
}

ProgramDesc layeredProgram(const char *kernelsPath) {
  ProgramDesc program = testKernelsProgram(kernelsPath);
  program.params = {{"w", fb::DType::f32, {8}, fb::InitKind::ones, 0.0},
                    {"m", fb::DType::f32, {4, 2}, fb::InitKind::normal, 0.5}};

  EntryDesc step;
  step.name = "step";
  step.inputs = {{"x", fb::DType::f32, {8}}};
  step.outputs = {{"y", fb::DType::f32, {8}},
                  {"z", fb::DType::f32, {8}},
                  {"g", fb::DType::f32, {2, 2}}};
  // Buffers: 0 x, 1 t, 2 u, 3 w, 4 y, 5 z, 6 x as [2,4], 7 m, 8 g.
  step.buffers = {
      inputBuffer(0, {8}),    arenaBuffer(0, {8}),    arenaBuffer(64, {8}),
      paramBuffer(0, {8}),    outputBuffer(0, {8}),   outputBuffer(1, {8}),
      inputBuffer(0, {2, 4}), paramBuffer(1, {4, 2}), outputBuffer(2, {2, 2})};
  GemmDesc gemm;
  gemm.a = 6;
  gemm.b = 7;
  gemm.c = 8;
  gemm.m = 2;
  gemm.n = 2;
  gemm.k = 4;
  step.commands = {CopyDesc{0, 1, 0, 0, 32},
                   LaunchDesc{0, {1, 2}},
                   LaunchDesc{1, {2, 3, 1}},
                   LaunchDesc{0, {1, 2}},
                   LaunchDesc{1, {2, 3, 1}},
                   LaunchDesc{0, {3, 3}},
                   CopyDesc{1, 4, 0, 0, 32},
                   LaunchDesc{2, {0, 5}},
                   gemm};
  step.graphs = {{"layers.0", 1, 2}, {"layers.1", 3, 3}};
  step.arenaBytes = step.peakBytes = 96;
  program.entries = {step};
  return program;
}

ProgramDesc dataParallelProgram(int64_t outer, int64_t shard,
                                int64_t extraPadding) {
  ProgramDesc program;
  program.mesh = MeshDesc{"world", {{"dp_outer", outer}, {"dp_shard", shard}}};
  program.submeshes = {{"dp_shard"}, {"dp_outer", "dp_shard"}, {"dp_outer"}};
  int64_t n = (15 + shard - 1) / shard + extraPadding;
  int64_t c = 8 / shard;
  program.params = {{"w",
                     fb::DType::f32,
                     {n},
                     fb::InitKind::normal,
                     0.5,
                     true,
                     ShardingDesc{0, {3, 5}}},
                    {"full", fb::DType::f32, {3, 5}, fb::InitKind::normal, 0.5},
                    {"piece",
                     fb::DType::f32,
                     {n},
                     fb::InitKind::copy,
                     0.0,
                     true,
                     ShardingDesc{0, {3, 5}},
                     false,
                     "full"}};

  EntryDesc step;
  step.name = "step";
  step.inputs = {{"x", fb::DType::f32, {2, 4}, /*split=*/1}};
  step.outputs = {{"gathered", fb::DType::f32, {shard * n}},
                  {"sum", fb::DType::f32, {2, 4}},
                  {"outer_avg", fb::DType::f32, {2, 4}},
                  {"scattered", fb::DType::f32, {c}},
                  {"sliced", fb::DType::f32, {c}},
                  {"shard_sum", fb::DType::f32, {2, 4}}};
  // Buffers: 0 x, 1 x as [8], 2 w, 3 gathered, 4 sum, 5 outer_avg,
  // 6 scattered, 7 sliced, 8 t, 9 shard_sum.
  step.buffers = {inputBuffer(0, {2, 4}),  inputBuffer(0, {8}),
                  paramBuffer(0, {n}),     outputBuffer(0, {shard * n}),
                  outputBuffer(1, {2, 4}), outputBuffer(2, {2, 4}),
                  outputBuffer(3, {c}),    outputBuffer(4, {c}),
                  arenaBuffer(0, {2, 4}),  outputBuffer(5, {2, 4})};
  auto collective = [](const char *kind, uint32_t submesh, fb::ReduceOp reduce,
                       uint64_t count, uint32_t src, uint32_t dst,
                       bool async = false) {
    return CollectiveDesc{kind,  submesh, reduce, fb::DType::f32,
                          count, src,     dst,    async};
  };
  step.commands = {collective("all_gather", 0, fb::ReduceOp::sum,
                              static_cast<uint64_t>(n), 2, 3, /*async=*/true),
                   collective("all_reduce", 1, fb::ReduceOp::sum, 8, 0, 4),
                   collective("all_reduce", 2, fb::ReduceOp::avg, 8, 0, 5),
                   collective("reduce_scatter", 0, fb::ReduceOp::sum,
                              static_cast<uint64_t>(c), 1, 6),
                   collective("shard_slice", 0, fb::ReduceOp::sum,
                              static_cast<uint64_t>(c), 1, 7),
                   CopyDesc{0, 8, 0, 0, 32},
                   collective("all_reduce", 0, fb::ReduceOp::sum, 8, 8, 8),
                   CopyDesc{8, 9, 0, 0, 32},
                   WaitDesc{0}};
  step.arenaBytes = step.peakBytes = 32;
  program.entries = {step};
  return program;
}

} // namespace megrt::test
