// The stand-in CUDA driver's checks, called directly: copies and launches
// outside allocations, overlapping copies, what a capture may hold, graph
// replay, and a kernel that breaks a rule of the GPU failing its launch
// with the emulator's message and leaving the context unusable.
#include <cuda.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;

std::string errorText(CUresult result) {
  const char *text = nullptr;
  cuGetErrorString(result, &text);
  return text ? text : "";
}

/// PTX naming the test library's kernels, as a module the stand-in loads.
const char kPtx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".visible .entry reverse(\n)\n{\n}\n"
                    ".visible .entry reverse_no_barrier(\n)\n{\n}\n";

class StandinTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    setenv("MEGEMU_KERNELS", MEGEMU_TEST_KERNELS, 1);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoadDataEx(&module, kPtx, 0, nullptr, nullptr),
              CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  }
  static CUmodule module;
  static CUstream stream;
};
CUmodule StandinTest::module;
CUstream StandinTest::stream;

TEST_F(StandinTest, CopiesStayInsideAllocations) {
  CUdeviceptr memory;
  ASSERT_EQ(cuMemAlloc(&memory, 64), CUDA_SUCCESS);
  std::vector<uint8_t> host(128);
  EXPECT_EQ(cuMemcpyHtoDAsync(memory, host.data(), 64, stream), CUDA_SUCCESS);
  CUresult result = cuMemcpyHtoDAsync(memory + 32, host.data(), 64, stream);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THAT(errorText(result), HasSubstr("outside every allocation"));
  result = cuMemcpyDtoDAsync(memory + 8, memory, 32, stream);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THAT(errorText(result), HasSubstr("the ranges overlap"));
  EXPECT_EQ(cuMemFree(memory), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(memory), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(StandinTest, CapturesRecordAndGraphsReplay) {
  CUdeviceptr memory;
  ASSERT_EQ(cuMemAlloc(&memory, 16), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(memory, 7, 16, stream), CUDA_SUCCESS);
  // Captured, not run; and what would break the capture is refused.
  uint8_t byte = 0;
  std::memcpy(&byte, reinterpret_cast<void *>(memory), 1);
  EXPECT_NE(byte, 7);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUdeviceptr other;
  EXPECT_EQ(cuMemAlloc(&other, 16), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_ILLEGAL_STATE);
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  std::memcpy(&byte, reinterpret_cast<void *>(memory), 1);
  EXPECT_EQ(byte, 7);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  cuMemFree(memory);
}

TEST_F(StandinTest, LaunchesRunOnTheEmulatorWithTheirArgumentsChecked) {
  CUfunction reverse;
  ASSERT_EQ(cuModuleGetFunction(&reverse, module, "reverse"), CUDA_SUCCESS);
  CUfunction missing;
  EXPECT_EQ(cuModuleGetFunction(&missing, module, "no_such_kernel"),
            CUDA_ERROR_NOT_FOUND);
  std::vector<float> in(128), out(128);
  for (int i = 0; i < 128; ++i)
    in[i] = static_cast<float>(i);
  CUdeviceptr a, b;
  ASSERT_EQ(cuMemAlloc(&a, 512), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, 512), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(a, in.data(), 512, stream), CUDA_SUCCESS);
  void *args[] = {&a, &b};
  ASSERT_EQ(cuLaunchKernel(reverse, 2, 1, 1, 64, 1, 1, 0, stream, args,
                           nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(out.data(), b, 512, stream), CUDA_SUCCESS);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(out[i], in[63 - i]) << i;

  // The kernel's view of its second argument spans 512 bytes; 256 follow.
  CUdeviceptr inside = b + 256;
  void *late[] = {&a, &inside};
  CUresult result = cuLaunchKernel(reverse, 2, 1, 1, 64, 1, 1, 0, stream,
                                   late, nullptr);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THAT(errorText(result), HasSubstr("argument 1"));
  result = cuLaunchKernel(reverse, 2, 1, 1, 64, 1, 1, 1024, stream, args,
                          nullptr);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THAT(errorText(result), HasSubstr("the kernel needs none"));
  result = cuLaunchKernel(reverse, 1, 1, 1, 2048, 1, 1, 0, stream, args,
                          nullptr);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  cuMemFree(a);
  cuMemFree(b);
}

// Last: a failed launch leaves the context unusable, as on a GPU.
TEST_F(StandinTest, ZZAKernelThatBreaksARuleFailsItsLaunchForGood) {
  CUfunction racy;
  ASSERT_EQ(cuModuleGetFunction(&racy, module, "reverse_no_barrier"),
            CUDA_SUCCESS);
  CUdeviceptr a, b;
  ASSERT_EQ(cuMemAlloc(&a, 512), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, 512), CUDA_SUCCESS);
  void *args[] = {&a, &b};
  CUresult result =
      cuLaunchKernel(racy, 2, 1, 1, 64, 1, 1, 0, stream, args, nullptr);
  EXPECT_EQ(result, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_THAT(errorText(result),
              HasSubstr("kernel 'reverse_no_barrier': block (0, 0, 0)"));
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(cuMemsetD8Async(a, 0, 4, stream), CUDA_ERROR_LAUNCH_FAILED);
}

} // namespace
