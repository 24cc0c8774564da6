// Test programs for the CUDA backend, on kernels written by hand in PTX.
#include "CudaPrograms.h"

namespace megrt::test {
namespace {

DispatchDesc elementwise(const std::string &entry,
                         std::vector<DispatchArgDesc> args) {
  return {entry, {kN / 128}, {128}, 0, std::move(args)};
}

} // namespace

const char *const kPtx = R"ptx(.version 8.0
.target sm_90
.address_size 64

// c[i] = a[i] + b[i], one thread per element.
.visible .entry add_f32(
    .param .u64 add_f32_a,
    .param .u64 add_f32_b,
    .param .u64 add_f32_c)
{
    .reg .b32 %r<5>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [add_f32_a];
    ld.param.u64 %rd2, [add_f32_b];
    ld.param.u64 %rd3, [add_f32_c];
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    mul.wide.u32 %rd7, %r4, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.rn.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
    ret;
}

// y[i] = 2 * x[i].
.visible .entry twice_f32(
    .param .u64 twice_f32_x,
    .param .u64 twice_f32_y)
{
    .reg .b32 %r<5>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<7>;

    ld.param.u64 %rd1, [twice_f32_x];
    ld.param.u64 %rd2, [twice_f32_y];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    add.rn.f32 %f2, %f1, %f1;
    add.s64 %rd6, %rd4, %rd5;
    st.global.f32 [%rd6], %f2;
    ret;
}

// out[t] = in[n - 1 - t] for the n threads of one block, through the top
// 4 KiB of 64 KiB of dynamic shared memory (beyond the default 48 KiB).
.extern .shared .align 16 .b8 reverse_smem[];

.visible .entry reverse_shared(
    .param .u64 reverse_shared_in,
    .param .u64 reverse_shared_out)
{
    .reg .b32 %r<8>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<7>;

    ld.param.u64 %rd1, [reverse_shared_in];
    ld.param.u64 %rd2, [reverse_shared_out];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    mov.u32 %r3, reverse_smem;
    shl.b32 %r4, %r1, 2;
    add.s32 %r5, %r3, %r4;
    st.shared.f32 [%r5+61440], %f1;
    bar.sync 0;
    sub.s32 %r6, %r2, %r1;
    shl.b32 %r6, %r6, 2;
    add.s32 %r7, %r3, %r6;
    ld.shared.f32 %f2, [%r7+61436];
    add.s64 %rd6, %rd4, %rd5;
    st.global.f32 [%rd6], %f2;
    ret;
}
)ptx";

ProgramDesc kernelProgram() {
  KernelDesc add{"add", "", 3};
  add.cudaLaunches = {
      elementwise("add_f32", {kernelArg(0), kernelArg(1), kernelArg(2)})};
  KernelDesc scaleAdd{"scale_add", "", 3};
  // An offset into the scratch area, which must reach the kernel.
  scaleAdd.cudaLaunches = {
      elementwise("twice_f32", {kernelArg(0), scratchArg(16)}),
      elementwise("add_f32", {scratchArg(16), kernelArg(1), kernelArg(2)})};
  scaleAdd.cudaScratchBytes = 16 + kBytes;
  KernelDesc reverse{"reverse", "", 2};
  reverse.cudaLaunches = {
      {"reverse_shared", {1}, {kN}, 64 * 1024, {kernelArg(0), kernelArg(1)}}};

  ProgramDesc program;
  program.kernels = {add, scaleAdd, reverse};
  program.params = {{"w", fb::DType::f32, {kN}, fb::InitKind::zeros, 0.0}};
  program.cuda = CudaModuleDesc{"sm_90", kPtx, {}};
  EntryDesc entry;
  entry.name = "step";
  entry.inputs = {{"x", fb::DType::f32, {kN}}, {"y", fb::DType::f32, {kN}}};
  entry.outputs = {{"sum", fb::DType::f32, {kN}},
                   {"scaled", fb::DType::f32, {kN}},
                   {"reversed", fb::DType::f32, {kN}}};
  entry.buffers = {inputBuffer(0, {kN}),  inputBuffer(1, {kN}),
                   paramBuffer(0, {kN}),  arenaBuffer(0, {kN}),
                   outputBuffer(0, {kN}), outputBuffer(1, {kN}),
                   outputBuffer(2, {kN}), arenaBuffer(0, {kN + 16})};
  entry.commands = {LaunchDesc{0, {0, 1, 3}},
                    // The sum moves 64 bytes up within the arena, overlapping
                    // itself, then out.
                    CopyDesc{3, 7, 0, 64, kBytes},
                    CopyDesc{7, 4, 64, 0, kBytes}, LaunchDesc{1, {0, 2, 5}},
                    LaunchDesc{2, {0, 6}}};
  entry.arenaBytes = entry.peakBytes = (kN + 16) * sizeof(float);
  program.entries = {entry};
  return program;
}

ProgramDesc accumulateProgram() {
  KernelDesc add{"add", "", 3};
  add.cudaLaunches = {
      elementwise("add_f32", {kernelArg(0), kernelArg(1), kernelArg(2)})};
  ProgramDesc program;
  program.kernels = {add};
  program.params = {{"w", fb::DType::f32, {kN}, fb::InitKind::ones, 0.0},
                    {"other", fb::DType::f32, {4}, fb::InitKind::ones, 0.0}};
  program.cuda = CudaModuleDesc{"sm_90", kPtx, {}};
  EntryDesc entry;
  entry.name = "accumulate";
  entry.inputs = {{"x", fb::DType::f32, {kN}}};
  entry.outputs = {{"out", fb::DType::f32, {kN}}};
  entry.buffers = {paramBuffer(0, {kN}), inputBuffer(0, {kN}),
                   outputBuffer(0, {kN})};
  entry.commands = {LaunchDesc{0, {0, 1, 0}}, CopyDesc{0, 2, 0, 0, kBytes}};
  program.entries = {entry};
  return program;
}

} // namespace megrt::test
