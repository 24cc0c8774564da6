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

} // namespace megrt::test
