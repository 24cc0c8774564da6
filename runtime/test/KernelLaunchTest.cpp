// KernelLaunch on the CPU: kernels from a shared object embedded in the
// artifact, loaded from memory.
#include "ArtifactBuilder.h"
#include "SamplePrograms.h"
#include "TestFiles.h"
#include "megrt/CpuFeatures.h"
#include "megrt/Error.h"
#include "megrt/Session.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;

#if defined(__aarch64__)
constexpr uint16_t kHostElfMachine = 183;
#else
constexpr uint16_t kHostElfMachine = 62;
#endif

/// Entry "step": y = (x + increment) * w, with w a parameter of ones, through
/// the arena (copy x in, add_constant, multiply, copy out), and z = exp(x)
/// straight from input to output.
ProgramDesc kernelProgram(const char *kernelsPath) {
  ProgramDesc program = testKernelsProgram(kernelsPath);
  program.params = {{"w", fb::DType::f32, {8}, fb::InitKind::ones, 0.0}};
  EntryDesc entry;
  entry.name = "step";
  entry.inputs = {{"x", fb::DType::f32, {8}}};
  entry.outputs = {{"y", fb::DType::f32, {8}}, {"z", fb::DType::f32, {8}}};
  entry.buffers = {inputBuffer(0, {8}),  arenaBuffer(0, {8}),
                   arenaBuffer(64, {8}), outputBuffer(0, {8}),
                   paramBuffer(0, {8}),  outputBuffer(1, {8})};
  entry.commands = {CopyDesc{0, 1, 0, 0, 32}, LaunchDesc{0, {1, 2}},
                    LaunchDesc{1, {2, 4, 1}}, CopyDesc{1, 3, 0, 0, 32},
                    LaunchDesc{2, {0, 5}}};
  entry.arenaBytes = 96;
  entry.peakBytes = 64;
  entry.unplannedBytes = 64;
  program.entries = {entry};
  return program;
}

std::map<std::string, Tensor> runStep(Session &session,
                                      const std::vector<float> &x) {
  return session.run("step", {{"x", Tensor::fromFloats(DType::F32, {8}, x)}});
}

std::vector<float> runY(Session &session, const std::vector<float> &x) {
  return runStep(session, x).at("y").toFloats();
}

std::string sessionError(const ProgramDesc &desc) {
  try {
    Session session(Program::fromBytes(buildArtifact(desc)));
  } catch (const Error &error) {
    return error.what();
  }
  return "(created)";
}

TEST(KernelLaunch, RunsKernelsFromTheEmbeddedObject) {
  Session session(
      Program::fromBytes(buildArtifact(kernelProgram(MEGRT_TEST_KERNELS_1))));
  std::vector<float> x = testValues(8, 3);
  std::map<std::string, Tensor> outputs = runStep(session, x);
  std::vector<float> y = outputs.at("y").toFloats();
  std::vector<float> z = outputs.at("z").toFloats();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(y[i], x[i] + 1.0f) << i;
    EXPECT_FLOAT_EQ(z[i], std::exp(x[i])) << i;
  }

  // Kernels read the parameter buffer in place.
  session.setParameter(
      "w", Tensor::fromFloats(DType::F32, {8}, std::vector<float>(8, 3.0f)));
  y = runY(session, x);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(y[i], (x[i] + 1.0f) * 3.0f) << i;
}

/// Records what a kernel observer sees.
class RecordingObserver : public KernelObserver {
public:
  void beforeLaunch(uint32_t kernel,
                    const std::vector<KernelArgument> &args) override {
    events.push_back("before " + std::to_string(kernel));
    for (const KernelArgument &arg : args)
      before.emplace_back(arg.data, arg.data + arg.bytes);
  }
  void afterLaunch(uint32_t kernel,
                   const std::vector<KernelArgument> &args) override {
    events.push_back("after " + std::to_string(kernel) + " of " +
                     std::to_string(args.size()));
    if (kernel == 0)
      addConstantOutput.assign(
          reinterpret_cast<const float *>(args[1].data),
          reinterpret_cast<const float *>(args[1].data + args[1].bytes));
  }
  std::vector<std::string> events;
  std::vector<std::vector<uint8_t>> before;
  std::vector<float> addConstantOutput;
};

TEST(KernelLaunch, ObserverSeesEveryLaunchAndItsBuffers) {
  RecordingObserver observer;
  SessionOptions options;
  options.kernelObserver = &observer;
  Session session(
      Program::fromBytes(buildArtifact(kernelProgram(MEGRT_TEST_KERNELS_1))),
      options);
  std::vector<float> x = testValues(8, 3);
  runStep(session, x);
  EXPECT_EQ(observer.events,
            (std::vector<std::string>{"before 0", "after 0 of 2", "before 1",
                                      "after 1 of 3", "before 2",
                                      "after 2 of 2"}));
  // add_constant's input before it ran is x (copied into the arena), and
  // its output after it ran is x + 1: the buffers themselves, 32 bytes each.
  ASSERT_EQ(observer.before.size(), 7u);
  ASSERT_EQ(observer.before[0].size(), 32u);
  EXPECT_EQ(std::memcmp(observer.before[0].data(), x.data(), 32), 0);
  ASSERT_EQ(observer.addConstantOutput.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(observer.addConstantOutput[i], x[i] + 1.0f) << i;
}

TEST(KernelLaunch, ModulesWithTheSameSymbolsStayApart) {
  Session one(
      Program::fromBytes(buildArtifact(kernelProgram(MEGRT_TEST_KERNELS_1))));
  Session two(
      Program::fromBytes(buildArtifact(kernelProgram(MEGRT_TEST_KERNELS_2))));
  std::vector<float> x(8, 10.0f);
  EXPECT_EQ(runY(one, x), std::vector<float>(8, 11.0f));
  EXPECT_EQ(runY(two, x), std::vector<float>(8, 12.0f));
  // A module loaded after another was released must be the new one.
  {
    Session gone(
        Program::fromBytes(buildArtifact(kernelProgram(MEGRT_TEST_KERNELS_1))));
  }
  Session three(
      Program::fromBytes(buildArtifact(kernelProgram(MEGRT_TEST_KERNELS_2))));
  EXPECT_EQ(runY(three, x), std::vector<float>(8, 12.0f));
}

TEST(KernelLaunch, MissingSymbolIsNamed) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.kernels[1].cpuSymbol = "multiply_v2";
  EXPECT_EQ(sessionError(desc),
            "kernel 'mul': symbol 'multiply_v2' is not in the CPU module");
}

TEST(KernelLaunch, KernelsNeedACpuModule) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.cpuObject.reset();
  EXPECT_EQ(sessionError(desc), "program has 3 kernels but no CPU module; "
                                "compile it for the cpu target");
}

TEST(KernelLaunch, RejectsANonElfModule) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.cpuObject = std::vector<uint8_t>{'M', 'Z', 0, 0, 1, 2, 3};
  EXPECT_EQ(sessionError(desc), "CPU module is not an ELF shared object");
}

TEST(KernelLaunch, RejectsATruncatedElf) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.cpuObject->resize(40);
  EXPECT_EQ(sessionError(desc), "CPU module is truncated: 40 bytes is less "
                                "than the ELF header");
  desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.cpuObject->resize(1024);
  EXPECT_THAT(sessionError(desc),
              HasSubstr("CPU module is truncated: segment "));
}

TEST(KernelLaunch, RejectsAnElfForAnotherMachineOrOfAnotherType) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  uint16_t machine = 183 + 62 - kHostElfMachine; // aarch64 <-> x86_64
  std::memcpy(desc.cpuObject->data() + 18, &machine, 2);
  EXPECT_EQ(sessionError(desc),
            "CPU module is for ELF machine " + std::to_string(machine) +
                ", this machine is " + std::to_string(kHostElfMachine));
  desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  (*desc.cpuObject)[16] = 2; // ET_EXEC
  EXPECT_EQ(sessionError(desc), "CPU module is an ELF object of type 2, "
                                "expected a shared object (3)");
}

TEST(KernelLaunch, ReportsWhyDlopenFailed) {
  // Point its libm dependency at a library that does not exist.
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  std::vector<uint8_t> &image = *desc.cpuObject;
  const char *libm = "libm.so.6";
  auto found = std::search(image.begin(), image.end(), libm, libm + 9);
  ASSERT_NE(found, image.end());
  found[3] = 'Q';
  EXPECT_THAT(sessionError(desc),
              HasSubstr("cannot load the CPU module: libQ.so.6: cannot open "
                        "shared object file"));
}

TEST(KernelLaunch, RejectsAnotherArchitecture) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
#if defined(__x86_64__)
  desc.targetTriple = "aarch64-unknown-linux-gnu";
  EXPECT_EQ(sessionError(desc), "CPU module was compiled for "
                                "'aarch64-unknown-linux-gnu', but this "
                                "machine is x86_64");
#else
  desc.targetTriple = "x86_64-unknown-linux-gnu";
  EXPECT_THAT(sessionError(desc),
              HasSubstr("compiled for 'x86_64-unknown-linux-gnu'"));
#endif
}

#if defined(__x86_64__)
TEST(KernelLaunch, RunsOnACpuWithTheFeaturesItNeeds) {
  // Exactly the checkable extensions this CPU has: accepted.
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  std::vector<std::string> present;
  for (const char *feature : kCheckableCpuFeatures)
    if (missingCpuFeatures({feature}).empty())
      present.push_back(feature);
  desc.cpuFeatures = present;
  EXPECT_EQ(sessionError(desc), "(created)");
}

/// Sets an environment variable for a scope.
struct ScopedEnv {
  ScopedEnv(const char *name, const char *value) : name(name) {
    setenv(name, value, 1);
  }
  ~ScopedEnv() { unsetenv(name); }
  const char *name;
};

TEST(KernelLaunch, RejectsCodeForExtensionsThisCpuLacks) {
  // Every x86-64 CPU megrt runs on has sse3: it lacks it only when told to
  // pretend (MEGRT_DISABLE_CPU_FEATURES), so the test runs on any machine.
  ASSERT_TRUE(missingCpuFeatures({"sse3"}).empty());
  ScopedEnv pretend("MEGRT_DISABLE_CPU_FEATURES", "bmi,sse3");
  ASSERT_EQ(missingCpuFeatures({"ssse3", "sse3"}),
            std::vector<std::string>{"sse3"});
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.cpuFeatures = {"sse3"};
  EXPECT_EQ(sessionError(desc),
            "the CPU code was compiled for instruction-set extensions this "
            "CPU lacks (sse3); recompile the model with --cpu=x86-64, or "
            "with --cpu=native on this machine");
}

TEST(KernelLaunch, RejectsExtensionsItCannotCheck) {
  ProgramDesc desc = kernelProgram(MEGRT_TEST_KERNELS_1);
  desc.cpuFeatures = {"avx10.9"};
  EXPECT_EQ(sessionError(desc),
            "the CPU code needs the instruction-set extension 'avx10.9', "
            "which this runtime cannot check; recompile the model with "
            "--cpu=x86-64");
}
#endif

} // namespace
} // namespace megrt::test

namespace megrt::test {
namespace {

/// Entry "grid": y = x + workgroup index per 8-element chunk (one dispatch
/// of 4 workgroups), and s = 2 * sum(x[0..8)) computed as per-workgroup
/// partials in the kernel's scratch that a second dispatch sums.
ProgramDesc gridProgram() {
  ProgramDesc program = testKernelsProgram(MEGRT_TEST_KERNELS_1);
  KernelDesc offset{"offset", "", 2};
  offset.cpuDispatches = {
      {"add_workgroup_id", {4}, {}, 0, {kernelArg(0), kernelArg(1)}}};
  KernelDesc sum{"sum", "", 2};
  sum.cpuDispatches = {
      {"double_into_partials", {8}, {}, 0, {scratchArg(64), kernelArg(0)}},
      {"sum_partials", {1}, {}, 0, {scratchArg(64), kernelArg(1)}}};
  sum.cpuScratchBytes = 64 + 8 * sizeof(float);
  program.kernels.push_back(offset);
  program.kernels.push_back(sum);
  EntryDesc entry;
  entry.name = "grid";
  entry.inputs = {{"x", fb::DType::f32, {32}}};
  entry.outputs = {{"y", fb::DType::f32, {32}}, {"s", fb::DType::f32, {1}}};
  entry.buffers = {inputBuffer(0, {32}), outputBuffer(0, {32}),
                   outputBuffer(1, {1})};
  entry.commands = {LaunchDesc{3, {0, 1}}, LaunchDesc{4, {0, 2}}};
  program.entries = {entry};
  return program;
}

TEST(KernelLaunch, DispatchGridsRunEveryWorkgroupOnAnyNumberOfThreads) {
  std::vector<float> x = testValues(32, 5);
  float expected = 0.0f;
  for (int i = 0; i < 8; ++i)
    expected += 2.0f * x[i];
  std::vector<uint8_t> bytes = buildArtifact(gridProgram());
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    SessionOptions options;
    options.threads = threads;
    Session session(Program::fromBytes(bytes), options);
    std::map<std::string, Tensor> outputs =
        session.run("grid", {{"x", Tensor::fromFloats(DType::F32, {32}, x)}});
    std::vector<float> y = outputs.at("y").toFloats();
    for (int i = 0; i < 32; ++i)
      EXPECT_EQ(y[i], x[i] + static_cast<float>(i / 8))
          << i << " on " << threads << " threads";
    EXPECT_EQ(outputs.at("s").toFloats()[0], expected) << threads;
  }
}

TEST(KernelLaunch, ProgramKernelSpecsDescribeTheirDispatches) {
  Program program = Program::fromBytes(buildArtifact(gridProgram()));
  const KernelSpec &sum = program.kernels()[4];
  EXPECT_EQ(sum.name, "sum");
  ASSERT_EQ(sum.cpu.dispatches.size(), 2u);
  EXPECT_EQ(sum.cpu.dispatches[0].entry, "double_into_partials");
  EXPECT_EQ(sum.cpu.dispatches[0].workgroups, 8u);
  EXPECT_EQ(sum.cpu.scratchBytes, 96u);
}

} // namespace
} // namespace megrt::test
