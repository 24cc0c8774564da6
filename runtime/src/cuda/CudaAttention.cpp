// Fused scaled-dot-product attention on a CUDA device: the flash-attention
// kernels of cuda/attention/FlashAttention.cu, embedded in the runtime as a
// fatbin, loaded into a context and launched through the driver API.
#include "cuda/CudaAttention.h"

#include "Fail.h"
#include "cuda/CudaDriver.h"
#include "cuda/attention/FlashAttentionParams.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>

#if MEGRT_CUDA_FATBINS
namespace megrt {
/// FlashAttention.cu compiled by nvcc (sm_90 SASS and compute_90 PTX),
/// written into the build by EmbedFatbin.cmake.
extern const uint8_t kFlashAttentionFatbin[];
extern const size_t kFlashAttentionFatbinSize;
} // namespace megrt
#endif

namespace megrt {
namespace {

using attention::AttentionParams;

/// The scratch's parts start at multiples of this from its start.
constexpr size_t kScratchAlignment = 256;

/// Grid dimensions y and z hold heads and batches.
constexpr int64_t kMaxGridYZ = 65535;

#if MEGRT_CUDA_FATBINS
constexpr DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};
#endif

size_t alignScratch(size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment *
         kScratchAlignment;
}

/// Byte offsets of the backward's scratch parts.
struct ScratchLayout {
  size_t lse, delta, dqAccum, total;
};

ScratchLayout scratchLayout(const AttentionShape &s) {
  size_t rowBytes = static_cast<size_t>(s.batch * s.heads * s.seqQ) * 4;
  size_t dqBytes =
      static_cast<size_t>(s.batch * s.seqQ * s.heads * s.headDim) * 4;
  ScratchLayout layout;
  layout.lse = 0;
  layout.delta = alignScratch(rowBytes);
  layout.dqAccum = layout.delta + alignScratch(rowBytes);
  layout.total = layout.dqAccum + alignScratch(dqBytes);
  return layout;
}

/// The smallest tier that holds both head dimensions.
int tierOf(const AttentionShape &s) {
  int64_t width = std::max(s.headDim, s.valueDim);
  for (int tier : attention::kTiers)
    if (width <= tier)
      return tier;
  fail(describeAttention(s), ": head dimensions up to ",
       attention::kTiers[std::size(attention::kTiers) - 1],
       " are supported on CUDA, found ", width);
}

void checkShape(const AttentionShape &s) {
  checkAttentionShape(s);
  tierOf(s);
  if (s.heads > kMaxGridYZ || s.batch > kMaxGridYZ)
    fail(describeAttention(s), ": at most ", kMaxGridYZ,
         " heads and batches are supported on CUDA");
}

std::string kernelName(const char *kernel, DType dtype, int tier) {
  return concat("megrt_attention_", kernel, "_", dtypeName(dtype), "_d", tier);
}

std::string dqKernelName(DType dtype) {
  return concat("megrt_attention_bwd_dq_", dtypeName(dtype));
}

AttentionParams paramsOf(const AttentionShape &s) {
  AttentionParams p{};
  p.batch = s.batch;
  p.seqQ = s.seqQ;
  p.seqKv = s.seqKv;
  p.heads = s.heads;
  p.kvHeads = s.kvHeads;
  p.headDim = s.headDim;
  p.valueDim = s.valueDim;
  p.scale = s.scale;
  p.scaleLog2e = static_cast<float>(s.scale * 1.4426950408889634);
  p.causal = s.causal ? 1 : 0;
  return p;
}

unsigned blocks(int64_t count, int64_t perBlock) {
  return static_cast<unsigned>((count + perBlock - 1) / perBlock);
}

} // namespace

CudaAttention::CudaAttention(const CudaContext &context) : context_(context) {
#if !MEGRT_CUDA_FATBINS
  fail("this runtime was built without nvcc; fused attention on CUDA is "
       "unavailable");
#else
  std::string what =
      concat("the flash-attention module (sm_90) on ", context.description());
  if (context.computeMajor() < 9)
    fail(what, ": fused attention needs compute capability 9.0 or newer");
  module_ = std::make_unique<EmbeddedModule>(context, kFlashAttentionFatbin,
                                             kFlashAttentionFatbinSize, what);
  auto resolve = [&](const std::string &name, unsigned sharedBytes) {
    functions_[name] = module_->function(name, sharedBytes);
  };
  for (DType dtype : kDTypes) {
    for (int tier : attention::kTiers) {
      resolve(kernelName("fwd", dtype, tier),
              attention::forwardSharedBytes(tier));
      resolve(kernelName("bwd_stats", dtype, tier),
              attention::forwardSharedBytes(tier));
      resolve(kernelName("bwd_kv", dtype, tier),
              attention::backwardSharedBytes(tier));
    }
    resolve(dqKernelName(dtype), 0);
  }
#endif
}

CudaAttention::~CudaAttention() = default;

CUfunction CudaAttention::function(const std::string &name) const {
  return functions_.at(name);
}

size_t CudaAttention::backwardScratchBytes(const AttentionShape &shape) {
  return scratchLayout(shape).total;
}

namespace {

/// Launches `function` with the one AttentionParams argument; errors name
/// the kernel and the shape.
void launch(CUfunction function, const std::string &name,
            const AttentionShape &shape, const AttentionParams &params,
            unsigned gridX, unsigned gridY, unsigned gridZ, unsigned shared,
            CUstream stream) {
  void *arguments[] = {const_cast<AttentionParams *>(&params)};
  checkCuda(cudaDriver().cuLaunchKernel(function, gridX, gridY, gridZ,
                                        attention::kThreads, 1, 1, shared,
                                        stream, arguments, nullptr),
            "cuLaunchKernel",
            concat("flash-attention kernel '", name, "' for ",
                   describeAttention(shape), " (grid ", gridX, "x", gridY, "x",
                   gridZ, ", ", shared, " bytes of shared memory)"));
}

} // namespace

void CudaAttention::forward(const AttentionShape &shape, CUdeviceptr q,
                            CUdeviceptr k, CUdeviceptr v, CUdeviceptr out,
                            CUdeviceptr stats, CUdeviceptr positions,
                            CUstream stream) const {
  checkShape(shape);
  int tier = tierOf(shape);
  AttentionParams params = paramsOf(shape);
  params.q = q;
  params.k = k;
  params.v = v;
  params.out = out;
  params.stats = stats;
  params.positions = positions;
  context_.makeCurrent();
  std::string name = kernelName("fwd", shape.dtype, tier);
  launch(function(name), name, shape, params,
         blocks(shape.seqQ, attention::kForwardQueries),
         static_cast<unsigned>(shape.heads), static_cast<unsigned>(shape.batch),
         attention::forwardSharedBytes(tier), stream);
}

void CudaAttention::backward(const AttentionShape &shape, CUdeviceptr dout,
                             CUdeviceptr q, CUdeviceptr k, CUdeviceptr v,
                             CUdeviceptr out, CUdeviceptr stats, CUdeviceptr dq,
                             CUdeviceptr dk, CUdeviceptr dv,
                             CUdeviceptr positions, CUdeviceptr scratch,
                             size_t scratchBytes, CUstream stream) const {
  checkShape(shape);
  int tier = tierOf(shape);
  ScratchLayout layout = scratchLayout(shape);
  if (scratchBytes < layout.total)
    fail(describeAttention(shape), ": the backward needs ", layout.total,
         " bytes of scratch, given ", scratchBytes);
  if (scratch % sizeof(float) != 0)
    fail(describeAttention(shape), ": the backward's scratch at 0x", std::hex,
         scratch, " is not 4-byte aligned");
  AttentionParams params = paramsOf(shape);
  params.q = q;
  params.k = k;
  params.v = v;
  params.out = out;
  params.dout = dout;
  params.dq = dq;
  params.dk = dk;
  params.dv = dv;
  params.lse = scratch + layout.lse;
  params.delta = scratch + layout.delta;
  params.dqAccum = scratch + layout.dqAccum;
  params.stats = stats;
  params.positions = positions;
  context_.makeCurrent();

  // Row statistics (converted from the forward's, or recomputed) and a
  // zeroed dq accumulator, then dk, dv and the dq sums, then dq rounded:
  // the stream orders the three.
  std::string rows = kernelName("bwd_stats", shape.dtype, tier);
  launch(function(rows), rows, shape, params,
         blocks(shape.seqQ, attention::kForwardQueries),
         static_cast<unsigned>(shape.heads), static_cast<unsigned>(shape.batch),
         attention::forwardSharedBytes(tier), stream);
  std::string kv = kernelName("bwd_kv", shape.dtype, tier);
  launch(function(kv), kv, shape, params,
         blocks(shape.seqKv, attention::backwardKeys(tier)),
         static_cast<unsigned>(shape.kvHeads),
         static_cast<unsigned>(shape.batch),
         attention::backwardSharedBytes(tier), stream);
  // Enough blocks to fill any GPU; each strides over the rest.
  constexpr int64_t kMaxConvertBlocks = 4096;
  int64_t elements = shape.batch * shape.seqQ * shape.heads * shape.headDim;
  std::string convert = dqKernelName(shape.dtype);
  int64_t convertBlocks =
      std::min(kMaxConvertBlocks,
               (elements + attention::kThreads - 1) / attention::kThreads);
  launch(function(convert), convert, shape, params,
         static_cast<unsigned>(convertBlocks), 1, 1, 0, stream);
}

} // namespace megrt
