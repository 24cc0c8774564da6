// The CUDA backend: hand-written PTX kernels, parameters mirrored in device
// memory, and the errors of module loading and launches. Gemm on CUDA is
// checked with the other devices in GemmTest.
#include "ArtifactBuilder.h"
#include "CudaPrograms.h"
#include "Fail.h"
#include "SamplePrograms.h"
#include "TestDevices.h"
#include "TestFiles.h"
#include "cuda/CublasLt.h"
#include "cuda/CudaDriver.h"
#include "megrt/Error.h"
#include "megrt/Safetensors.h"
#include "megrt/Session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const char *const kNoDriver =
    "CUDA device requested but no CUDA driver was found (dlopen libcuda.so.1: ";

Tensor floats(const std::vector<float> &values) {
  return Tensor::fromFloats(DType::F32, {static_cast<int64_t>(values.size())},
                            values);
}

std::vector<float> plus(const std::vector<float> &a,
                        const std::vector<float> &b) {
  std::vector<float> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    sum[i] = a[i] + b[i];
  return sum;
}

/// Bit-exact comparison reporting the first difference only.
void expectSameFloats(const std::vector<float> &got,
                      const std::vector<float> &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << "[" << i << "] is " << got[i] << ", expected "
                    << want[i];
      return;
    }
}

Session openSession(const ProgramDesc &desc,
                    const std::string &device = "cuda") {
  return Session(Program::fromBytes(buildArtifact(desc)), {device, 0});
}

std::string sessionError(const ProgramDesc &desc,
                         const std::string &device = "cuda") {
  try {
    openSession(desc, device);
  } catch (const Error &error) {
    return error.what();
  }
  return "(created)";
}

/// "sm_XY" of cuda:0.
std::string deviceArch() {
  const CudaDriver &driver = cudaDriver();
  CUdevice device;
  int major = 0, minor = 0;
  checkCuda(driver.cuDeviceGet(&device, 0), "cuDeviceGet", "test");
  checkCuda(driver.cuDeviceGetAttribute(
                &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
            "cuDeviceGetAttribute", "test");
  checkCuda(driver.cuDeviceGetAttribute(
                &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
            "cuDeviceGetAttribute", "test");
  return concat("sm_", major, minor);
}

// --- Without a GPU ----------------------------------------------------------

TEST(CudaLibraries, MissingDriverFailsSessionsCleanly) {
  try {
    cudaDriver();
    GTEST_SKIP() << "a CUDA driver is installed";
  } catch (const Error &error) {
    if (!::testing::Value(std::string(error.what()), StartsWith(kNoDriver)))
      GTEST_SKIP() << "the CUDA driver is installed but unusable: "
                   << error.what();
  }
  // The driver is looked for first, whatever the program holds.
  for (const char *device : {"cuda", "cuda:0", "cuda:7"}) {
    EXPECT_THAT(sessionError(kernelProgram(), device), StartsWith(kNoDriver));
    EXPECT_THAT(sessionError(linearProgram(), device), StartsWith(kNoDriver));
  }
}

TEST(CudaLibraries, CublasLtOfThisBuildLoads) {
  const CublasLtLibrary *library = nullptr;
  try {
    library = &cublasLt();
  } catch (const Error &error) {
    if (!::testing::Value(std::string(error.what()),
                          HasSubstr("could not be loaded")))
      throw;
    GTEST_SKIP() << "no cuBLASLt here: " << error.what();
  }
  EXPECT_EQ(library->cublasLtGetVersion() / 10000, size_t(CUBLAS_VER_MAJOR));
}

// --- On a GPU ---------------------------------------------------------------

class CudaSession : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason = deviceUnavailable("cuda");
    if (!reason.empty())
      GTEST_SKIP() << "CUDA unavailable: " << reason;
  }
};

TEST_F(CudaSession, RunsHandWrittenKernels) {
  Session session = openSession(kernelProgram());
  std::vector<float> x = testValues(kN, 1), y = testValues(kN, 2);
  std::map<std::string, Tensor> inputs = {{"x", floats(x)}, {"y", floats(y)}};
  std::vector<float> reversed(x.rbegin(), x.rend());
  for (uint32_t seed : {3, 4}) {
    std::vector<float> w = testValues(kN, seed);
    session.setParameter("w", floats(w));
    std::map<std::string, Tensor> outputs = session.run("step", inputs);
    expectSameFloats(outputs.at("sum").toFloats(), plus(x, y), "sum");
    expectSameFloats(outputs.at("scaled").toFloats(), plus(plus(x, x), w),
                     "scaled");
    expectSameFloats(outputs.at("reversed").toFloats(), reversed, "reversed");
  }
}

TEST_F(CudaSession, ParametersFollowTheDevice) {
  Session session = openSession(accumulateProgram());
  std::vector<float> ones(kN, 1.0f), x = testValues(kN, 5);
  std::map<std::string, Tensor> inputs = {{"x", floats(x)}};
  expectSameFloats(session.parameter("w").toFloats(), ones, "initial w");

  std::vector<float> w = plus(ones, x);
  expectSameFloats(session.run("accumulate", inputs).at("out").toFloats(), w,
                   "out");
  expectSameFloats(session.parameter("w").toFloats(), w, "w after a run");
  // The device keeps its copy: no upload of the host copy just read.
  w = plus(w, x);
  session.run("accumulate", inputs);
  expectSameFloats(session.parameter("w").toFloats(), w, "w after two runs");

  std::vector<float> set = testValues(kN, 6);
  session.setParameter("w", floats(set));
  session.run("accumulate", inputs);
  w = plus(set, x);
  expectSameFloats(session.parameter("w").toFloats(), w, "w after set, run");

  std::string path = tempPath("w.safetensors");
  session.saveParameters(path);
  expectSameFloats(readSafetensors(path).at("w").toFloats(), w, "saved w");
  Session loaded = openSession(accumulateProgram());
  loaded.loadParameters(path);
  expectSameFloats(loaded.parameter("w").toFloats(), w, "loaded w");
  expectSameFloats(loaded.run("accumulate", inputs).at("out").toFloats(),
                   plus(w, x), "out after load");

  session.initParameters(7);
  expectSameFloats(session.parameter("w").toFloats(), ones, "reinitialised w");
  expectSameFloats(session.run("accumulate", inputs).at("out").toFloats(),
                   plus(ones, x), "out after init");
  expectSameFloats(session.parameter("other").toFloats(),
                   std::vector<float>(4, 1.0f), "other");
}

TEST_F(CudaSession, RunsTheLinearProgram) {
  // The CPU reference is computed here, so that this test needs no BLAS.
  ProgramDesc desc = linearProgram();
  desc.cuda = CudaModuleDesc{"sm_90", kEmptyPtx, {}};
  Session session = openSession(desc, "cuda:0");
  std::vector<float> w = testValues(12, 1), b = {0.5f, -1.0f, 2.0f};
  session.setParameter("w", Tensor::fromFloats(DType::F32, {4, 3}, w));
  session.setParameter("b", floats(b));
  Tensor x = Tensor::fromFloats(DType::F32, {2, 4}, testValues(8, 2));
  std::vector<float> xs = x.toFloats();
  std::vector<float> y = session.run("forward", {{"x", x}}).at("y").toFloats();
  ASSERT_EQ(y.size(), 6u);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double want = b[j];
      for (int p = 0; p < 4; ++p)
        want += double(xs[i * 4 + p]) * w[p * 3 + j];
      EXPECT_NEAR(y[i * 3 + j], want, 1e-5) << i << "," << j;
    }
  EXPECT_EQ(session.run("identity", {{"x", x}}).at("y"), x);
}

TEST_F(CudaSession, ModuleErrorsNameTheirCause) {
  EXPECT_EQ(sessionError(linearProgram()),
            "the artifact has no CUDA code (compile with --target=cpu,cuda)");

  ProgramDesc desc = kernelProgram();
  desc.kernels[2].cudaLaunches[0].entry = "reverse_v2";
  EXPECT_EQ(sessionError(desc), "kernel 'reverse', CUDA launch 0 "
                                "('reverse_v2'): the CUDA module has no entry "
                                "'reverse_v2'");

  desc = kernelProgram();
  desc.cuda->ptx = std::string(kPtx) + "\nthis is not PTX\n";
  std::string error = sessionError(desc);
  EXPECT_THAT(error, HasSubstr("loading the artifact's CUDA module (PTX for "
                               "'sm_90', compiled by the driver) on cuda:0"));
  EXPECT_THAT(error,
              HasSubstr("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX"));
  // The JIT's log follows on the next lines.
  EXPECT_THAT(error, HasSubstr("\n"));

  EXPECT_THAT(sessionError(kernelProgram(), "cuda:99"),
              StartsWith("device 'cuda:99' does not exist: the CUDA driver "
                         "sees "));
}

TEST_F(CudaSession, CubinOnlyForItsArchitecture) {
  std::vector<float> x = testValues(kN, 1), y = testValues(kN, 2);
  std::map<std::string, Tensor> inputs = {{"x", floats(x)}, {"y", floats(y)}};
  std::vector<uint8_t> notACubin = {0x7f, 'E', 'L', 'F', 1, 2, 3, 4};

  // A cubin for another architecture is ignored for the PTX.
  ProgramDesc desc = kernelProgram();
  desc.cuda->arch = deviceArch() == "sm_75" ? "sm_80" : "sm_75";
  desc.cuda->cubin = notACubin;
  expectSameFloats(openSession(desc).run("step", inputs).at("sum").toFloats(),
                   plus(x, y), "sum with another architecture's cubin");

  // An empty cubin counts as none.
  desc.cuda->arch = deviceArch();
  desc.cuda->cubin.clear();
  expectSameFloats(openSession(desc).run("step", inputs).at("sum").toFloats(),
                   plus(x, y), "sum with an empty cubin");

  // A cubin for this device is used, and a damaged one is an error before
  // the driver reads it.
  desc.cuda->cubin = notACubin;
  EXPECT_EQ(sessionError(desc),
            "the artifact's CUDA module (cubin for " + deviceArch() +
                "): the cubin of 8 bytes is shorter than an ELF header");
}

TEST_F(CudaSession, LoadsACubin) {
  if (kEmptyModuleCubin.empty())
    GTEST_SKIP() << "the CUDA toolkit had no ptxas to build a cubin";
  if (deviceArch() != "sm_90")
    GTEST_SKIP() << "the test cubin is for sm_90, cuda:0 is " << deviceArch();
  // No PTX to fall back on: the Gemm and Copy run with the cubin loaded.
  ProgramDesc desc = linearProgram();
  desc.cuda = CudaModuleDesc{"sm_90", "", kEmptyModuleCubin};
  Session session = openSession(desc);
  Tensor x = Tensor::fromFloats(DType::F32, {2, 4}, testValues(8, 2));
  EXPECT_EQ(session.run("identity", {{"x", x}}).at("y"), x);
}

TEST_F(CudaSession, LaunchErrorsNameTheLaunch) {
  // Blocks of 1 x 1 x 65 threads: z is limited to 64. (Were it launched,
  // every thread would still stay inside the buffers.)
  ProgramDesc desc = kernelProgram();
  desc.kernels[0].cudaLaunches[0].grid = {kN};
  desc.kernels[0].cudaLaunches[0].block = {1, 1, 65};
  Session session = openSession(desc);
  try {
    session.run("step", {{"x", floats(testValues(kN, 1))},
                         {"y", floats(testValues(kN, 2))}});
    FAIL() << "the launch was accepted";
  } catch (const Error &error) {
    EXPECT_THAT(std::string(error.what()),
                HasSubstr("entry 'step', command 0 (launch), kernel 'add', "
                          "CUDA launch 0 ('add_f32'): cuLaunchKernel failed: "
                          "CUDA_ERROR_INVALID_VALUE"));
  }

  // More dynamic shared memory than any GPU has.
  desc = kernelProgram();
  desc.kernels[2].cudaLaunches[0].sharedBytes = 4 << 20;
  EXPECT_THAT(sessionError(desc),
              HasSubstr("kernel 'reverse', CUDA launch 0 ('reverse_shared') "
                        "with 4194304 bytes of dynamic shared memory: "
                        "cuFuncSetAttribute failed: CUDA_ERROR_"));
}

} // namespace
} // namespace megrt::test
