// The choice between cuDNN's attention and the runtime's own kernels, and
// the loading of libcudnn: everything of the cuDNN path that runs without a
// GPU. AttentionTest runs cuDNN's attention itself against the CPU.
#include "cuda/CudnnAttention.h"
#include "cuda/CudaAttention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace megrt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

AttentionShape bf16Shape() {
  return {2, 128, 128, 8, 2, 64, 64, true, 0.125f, DType::BF16};
}

TEST(CudnnAttentionRefusal, TakesHalfPrecisionOnHopperAndNewer) {
  AttentionShape shape = bf16Shape();
  EXPECT_EQ(cudnnAttentionRefusal(shape, 9), "");
  EXPECT_EQ(cudnnAttentionRefusal(shape, 10), "");
  shape.dtype = DType::F16;
  EXPECT_EQ(cudnnAttentionRefusal(shape, 9), "");
}

TEST(CudnnAttentionRefusal, SaysWhyNot) {
  AttentionShape shape = bf16Shape();
  shape.dtype = DType::F32;
  EXPECT_EQ(cudnnAttentionRefusal(shape, 9),
            "cuDNN's attention is used for bf16 and f16, not f32");
  EXPECT_EQ(cudnnAttentionRefusal(bf16Shape(), 8),
            "cuDNN's attention is used on compute capability 9.0 and newer");
  shape = bf16Shape();
  shape.valueDim = 60;
  EXPECT_EQ(cudnnAttentionRefusal(shape, 9),
            "cuDNN's attention takes head dimensions that are multiples of 8 "
            "up to 256, not 60");
  shape = bf16Shape();
  shape.headDim = 264;
  EXPECT_THAT(cudnnAttentionRefusal(shape, 9), HasSubstr("not 264"));
  shape = bf16Shape();
  shape.seqQ = 200;
  EXPECT_THAT(cudnnAttentionRefusal(shape, 9),
              HasSubstr("more queries than keys"));
  shape.causal = false;
  EXPECT_EQ(cudnnAttentionRefusal(shape, 9), "");
}

TEST(AttentionKernelChoice, FallsBackToOwnKernelsWithoutCudnn) {
  AttentionShape shape = bf16Shape();
  for (bool stats : {false, true}) {
    AttentionChoice forward = chooseAttentionKernels(
        shape, false, stats, false, nullptr, "cuDNN is not available", 9);
    EXPECT_EQ(forward.cudnn, nullptr);
    EXPECT_EQ(forward.scratch, 0u);
    EXPECT_EQ(forward.note, "megrt (cuDNN is not available)");
    AttentionChoice backward = chooseAttentionKernels(
        shape, true, stats, false, nullptr, "cuDNN is not available", 9);
    EXPECT_EQ(backward.cudnn, nullptr);
    EXPECT_EQ(backward.scratch, CudaAttention::backwardScratchBytes(shape));
    EXPECT_EQ(backward.note, "megrt (cuDNN is not available)");
  }
}

TEST(AttentionKernelChoice, RefusalComesBeforeAvailability) {
  AttentionShape shape = bf16Shape();
  shape.dtype = DType::F32;
  AttentionChoice choice = chooseAttentionKernels(shape, true, true, false,
                                                  nullptr, "not loaded", 9);
  EXPECT_EQ(choice.cudnn, nullptr);
  EXPECT_EQ(choice.note,
            "megrt (cuDNN's attention is used for bf16 and f16, not f32)");
}

// A context-parallel rank's queries stand at positions of their own, which
// cuDNN's causal masks (aligned to a corner) cannot place.
TEST(AttentionKernelChoice, QueryPositionsRunOnTheRuntimesKernels) {
  AttentionShape shape = bf16Shape();
  AttentionChoice choice = chooseAttentionKernels(shape, false, true, true,
                                                  nullptr, "not loaded", 9);
  EXPECT_EQ(choice.cudnn, nullptr);
  EXPECT_EQ(choice.note, "megrt (query positions)");
}

#if MEGRT_WITH_CUDNN

TEST(CudnnLibrary, MissingLibraryIsDescribed) {
  CudnnLibraryStatus status =
      loadCudnnLibrary({"/nonexistent/megrt-test/libcudnn.so.9"});
  EXPECT_FALSE(status.loaded);
  EXPECT_THAT(status.description,
              StartsWith("libcudnn.so.9 could not be loaded ("));
  EXPECT_THAT(status.description,
              HasSubstr("/nonexistent/megrt-test/libcudnn.so.9"));
  EXPECT_THAT(status.description, HasSubstr("set MEGRT_CUDNN_LIBRARY"));
}

TEST(CudnnLibrary, OtherLibraryIsRefused) {
  CudnnLibraryStatus status = loadCudnnLibrary({"libm.so.6"});
  EXPECT_FALSE(status.loaded);
  EXPECT_EQ(status.description,
            "'libm.so.6' has no 'cudnnGetVersion'; is it cuDNN?");
}

TEST(CudnnLibrary, EnvironmentPathComesFirst) {
  setenv("MEGRT_CUDNN_LIBRARY", "/opt/cudnn/libcudnn.so.9", 1);
  std::vector<std::string> candidates = cudnnLibraryCandidates();
  unsetenv("MEGRT_CUDNN_LIBRARY");
  ASSERT_GE(candidates.size(), 2u);
  EXPECT_EQ(candidates[0], "/opt/cudnn/libcudnn.so.9");
  EXPECT_EQ(candidates[1], "libcudnn.so.9");
  EXPECT_EQ(cudnnLibraryCandidates().front(), "libcudnn.so.9");
}

TEST(CudnnLibrary, InstalledLibraryLoads) {
  std::string found;
  for (const std::string &path : cudnnLibraryCandidates())
    if (path.find('/') != std::string::npos && std::filesystem::exists(path))
      found = path;
  if (found.empty())
    GTEST_SKIP() << "no libcudnn.so.9 in the toolkit's folders";
  CudnnLibraryStatus status = loadCudnnLibrary({found});
  EXPECT_TRUE(status.loaded) << status.description;
  EXPECT_THAT(status.description, StartsWith("cuDNN 9."));
  EXPECT_THAT(status.description, HasSubstr(found));
}

#else

TEST(CudnnLibrary, BuildWithoutFrontendSaysSo) {
  CudnnLibraryStatus status = loadCudnnLibrary({"libcudnn.so.9"});
  EXPECT_FALSE(status.loaded);
  EXPECT_EQ(status.description,
            "this runtime was built without the cuDNN frontend");
}

#endif

} // namespace
} // namespace megrt::test
