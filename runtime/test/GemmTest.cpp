// Gemm commands on every device against a naive triple loop.
#include "ArtifactBuilder.h"
#include "TestDevices.h"
#include "TestFiles.h"
#include "megrt/HalfFloat.h"
#include "megrt/Session.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

namespace megrt::test {
namespace {

struct GemmCase {
  int64_t m, n, k;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  bool transA = false, transB = false, bias = false;
  float alpha = 1.0f, beta = 0.0f;
  fb::DType dtype = fb::DType::f32;
  /// A and C go through the arena at offsets of a few elements, so that
  /// they are only element-aligned.
  bool offsetOperands = false;
  /// tanh-approximated GELU after the bias.
  bool gelu = false;
};

int64_t spanOf(int64_t batch, int64_t stride, int64_t matrix) {
  return (batch - 1) * stride + matrix;
}

/// Entry "gemm": inputs a, b, c (and bias); output out = c, then the gemm
/// applied to out in place (or, with offsetOperands, to copies of a and c in
/// the arena, c's copied out afterwards).
ProgramDesc gemmProgram(const GemmCase &gc) {
  int64_t spanA = spanOf(gc.batch, gc.strideA, gc.m * gc.k);
  int64_t spanB = spanOf(gc.batch, gc.strideB, gc.k * gc.n);
  int64_t spanC = spanOf(gc.batch, gc.strideC, gc.m * gc.n);
  EntryDesc entry;
  entry.name = "gemm";
  entry.inputs = {{"a", gc.dtype, {spanA}},
                  {"b", gc.dtype, {spanB}},
                  {"c", gc.dtype, {spanC}}};
  entry.outputs = {{"out", gc.dtype, {spanC}}};
  entry.buffers = {
      inputBuffer(0, {spanA}, gc.dtype), inputBuffer(1, {spanB}, gc.dtype),
      inputBuffer(2, {spanC}, gc.dtype), outputBuffer(0, {spanC}, gc.dtype)};
  GemmDesc gemm{0,          1,          3,          -1,
                gc.m,       gc.n,       gc.k,       gc.batch,
                gc.strideA, gc.strideB, gc.strideC, gc.transA,
                gc.transB,  gc.alpha,   gc.beta,    gc.dtype};
  if (gc.gelu)
    gemm.epilogue = fb::GemmEpilogue::gelu_tanh;
  if (gc.bias) {
    entry.inputs.push_back({"bias", gc.dtype, {gc.n}});
    entry.buffers.push_back(inputBuffer(3, {gc.n}, gc.dtype));
    gemm.bias = 4;
  }
  uint64_t element = elementSize(static_cast<DType>(gc.dtype));
  uint64_t bytesA = static_cast<uint64_t>(spanA) * element;
  uint64_t bytesC = static_cast<uint64_t>(spanC) * element;
  if (!gc.offsetOperands) {
    entry.commands = {CopyDesc{2, 3, 0, 0, bytesC}, gemm};
  } else {
    uint64_t offsetA = element;
    uint64_t offsetC = (offsetA + bytesA + 255) / 256 * 256 + 3 * element;
    uint32_t arenaA = static_cast<uint32_t>(entry.buffers.size());
    entry.buffers.push_back(arenaBuffer(offsetA, {spanA}, gc.dtype));
    entry.buffers.push_back(arenaBuffer(offsetC, {spanC}, gc.dtype));
    gemm.a = arenaA;
    gemm.c = arenaA + 1;
    entry.commands = {CopyDesc{0, arenaA, 0, 0, bytesA},
                      CopyDesc{2, arenaA + 1, 0, 0, bytesC}, gemm,
                      CopyDesc{arenaA + 1, 3, 0, 0, bytesC}};
    entry.arenaBytes = entry.peakBytes = offsetC + bytesC;
  }
  ProgramDesc program;
  program.entries = {entry};
  // No kernels: the module only lets the program run on CUDA.
  program.cuda = CudaModuleDesc{"sm_90", kEmptyPtx, {}};
  return program;
}

/// The same semantics in double, on the values the tensors actually hold.
std::vector<double> reference(const GemmCase &gc,
                              const std::map<std::string, Tensor> &inputs,
                              std::vector<double> &magnitude) {
  std::vector<float> a = inputs.at("a").toFloats();
  std::vector<float> b = inputs.at("b").toFloats();
  std::vector<float> c = inputs.at("c").toFloats();
  std::vector<float> bias =
      gc.bias ? inputs.at("bias").toFloats() : std::vector<float>();
  std::vector<double> out(c.begin(), c.end());
  magnitude.assign(c.size(), 0.0);
  for (int64_t batch = 0; batch < gc.batch; ++batch)
    for (int64_t i = 0; i < gc.m; ++i)
      for (int64_t j = 0; j < gc.n; ++j) {
        double sum = 0.0, absSum = 0.0;
        for (int64_t p = 0; p < gc.k; ++p) {
          double av = gc.transA ? a[batch * gc.strideA + p * gc.m + i]
                                : a[batch * gc.strideA + i * gc.k + p];
          double bv = gc.transB ? b[batch * gc.strideB + j * gc.k + p]
                                : b[batch * gc.strideB + p * gc.n + j];
          sum += av * bv;
          absSum += std::abs(av * bv);
        }
        int64_t index = batch * gc.strideC + i * gc.n + j;
        out[index] =
            gc.alpha * sum + gc.beta * c[index] + (gc.bias ? bias[j] : 0.0);
        if (gc.gelu) {
          double x = out[index];
          out[index] = 0.5 * x *
                       (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                        (x + 0.044715 * x * x * x)));
        }
        magnitude[index] = std::abs(gc.alpha) * absSum +
                           std::abs(gc.beta * c[index]) +
                           (gc.bias ? std::abs(bias[j]) : 0.0);
      }
  return out;
}

Tensor randomTensor(DType dtype, int64_t count, uint32_t seed) {
  return Tensor::fromFloats(dtype, {count}, testValues(count, seed));
}

/// Runs every test on each device, skipping devices this machine lacks.
class Gemm : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string reason = deviceUnavailable(GetParam());
    if (!reason.empty())
      GTEST_SKIP() << GetParam() << " unavailable: " << reason;
  }

  Session openSession(const GemmCase &gc) const {
    return Session(Program::fromBytes(buildArtifact(gemmProgram(gc))),
                   {GetParam(), 0});
  }

  void checkGemm(const GemmCase &gc) const;
};

void Gemm::checkGemm(const GemmCase &gc) const {
  Session session = openSession(gc);
  const EntrySpec &entry = *session.program().findEntry("gemm");
  std::map<std::string, Tensor> inputs;
  uint32_t seed = 1;
  for (const TensorSpec &spec : entry.inputs)
    inputs.emplace(spec.name, randomTensor(spec.dtype, spec.shape[0], seed++));
  std::vector<float> got = session.run("gemm", inputs).at("out").toFloats();
  std::vector<double> magnitude;
  std::vector<double> want = reference(gc, inputs, magnitude);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // f32: accumulation error only. 16-bit: the output rounding (2^-9
    // relative for bf16) dominates, plus one rounding to the 16-bit type of
    // an intermediate as large as the terms: on an H200, cuBLASLt's bf16/f16
    // results with a bias or beta were up to 2^-9 of the magnitude off
    // after cancellation (also with split-K restricted to f32 partials),
    // while the CPU path rounds only once.
    double tolerance = gc.dtype == fb::DType::f32
                           ? 1e-5 * (magnitude[i] + 1e-30)
                           : 1e-2 * std::abs(want[i]) + 0x1p-8 * magnitude[i];
    ASSERT_NEAR(got[i], want[i], tolerance) << "element " << i;
  }
}

TEST_P(Gemm, F32Plain) { checkGemm({3, 5, 4}); }

TEST_P(Gemm, F32Transposes) {
  checkGemm({3, 5, 4, 1, 0, 0, 0, true, false});
  checkGemm({3, 5, 4, 1, 0, 0, 0, false, true});
  checkGemm({3, 5, 4, 1, 0, 0, 0, true, true});
}

TEST_P(Gemm, F32Batched) { checkGemm({3, 5, 4, 3, 12, 20, 15}); }

TEST_P(Gemm, F32BatchedWithTransposes) {
  checkGemm({4, 2, 6, 2, 24, 12, 8, true, true});
}

TEST_P(Gemm, F32BroadcastsAWithStrideZero) {
  checkGemm({3, 5, 4, 3, 0, 20, 15});
}

TEST_P(Gemm, F32BroadcastsBWithStrideZero) {
  checkGemm({3, 5, 4, 3, 12, 0, 15, false, true});
}

TEST_P(Gemm, F32PaddedOutputStrideKeepsTheGaps) {
  // stride_c 20 > m*n 15: the 5 elements between batches keep c's values.
  checkGemm({3, 5, 4, 2, 12, 20, 20});
}

TEST_P(Gemm, F32BiasAlphaBeta) {
  GemmCase gc{3, 5, 4, 2, 12, 20, 15};
  gc.bias = true;
  gc.alpha = 0.5f;
  gc.beta = 2.0f;
  checkGemm(gc);
}

TEST_P(Gemm, F32LargerThanOneBlasBlock) {
  GemmCase gc{67, 33, 129, 2, 67 * 129, 0, 67 * 33, false, true};
  gc.bias = true;
  checkGemm(gc);
}

TEST_P(Gemm, Bf16BatchedTransposedWithBias) {
  GemmCase gc{5, 7, 16, 3, 80, 112, 35, true, false};
  gc.bias = true;
  gc.beta = 1.0f;
  gc.dtype = fb::DType::bf16;
  checkGemm(gc);
}

TEST_P(Gemm, Bf16Broadcast) {
  GemmCase gc{4, 6, 8, 2, 0, 48, 24, false, true};
  gc.dtype = fb::DType::bf16;
  checkGemm(gc);
}

TEST_P(Gemm, GeluEpilogue) {
  for (fb::DType dtype : {fb::DType::f32, fb::DType::bf16}) {
    GemmCase gc{6, 10, 16};
    gc.transB = true;
    gc.bias = true;
    gc.gelu = true;
    gc.dtype = dtype;
    checkGemm(gc);
    gc.bias = false;
    checkGemm(gc);
  }
}

TEST_P(Gemm, F16BatchedWithBias) {
  GemmCase gc{5, 7, 16, 2, 80, 112, 40};
  gc.bias = true;
  gc.alpha = 0.25f;
  gc.dtype = fb::DType::f16;
  checkGemm(gc);
}

TEST_P(Gemm, BetaZeroIgnoresNaNInC) {
  for (fb::DType dtype : {fb::DType::f32, fb::DType::bf16}) {
    GemmCase gc{2, 3, 4};
    gc.dtype = dtype;
    Session session = openSession(gc);
    DType type = static_cast<DType>(dtype);
    std::vector<float> nans(6, std::numeric_limits<float>::quiet_NaN());
    std::map<std::string, Tensor> inputs = {
        {"a", Tensor::fromFloats(type, {8}, testValues(8, 1))},
        {"b", Tensor::fromFloats(type, {12}, testValues(12, 2))},
        {"c", Tensor::fromFloats(type, {6}, nans)}};
    for (float value : session.run("gemm", inputs).at("out").toFloats())
      EXPECT_TRUE(std::isfinite(value)) << dtypeName(type);
  }
}

TEST_P(Gemm, OperandsAtElementOffsets) {
  for (fb::DType dtype : {fb::DType::f32, fb::DType::bf16, fb::DType::f16}) {
    GemmCase gc{9, 13, 11, 2, 99, 143, 117, false, true};
    gc.bias = true;
    gc.beta = 0.5f;
    gc.dtype = dtype;
    gc.offsetOperands = true;
    checkGemm(gc);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Gemm, ::testing::ValuesIn(testDevices()),
                         [](const auto &info) { return info.param; });

} // namespace
} // namespace megrt::test
