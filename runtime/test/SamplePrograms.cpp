// Small valid programs that tests load as they are or break on purpose.
#include "SamplePrograms.h"

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

} // namespace megrt::test
