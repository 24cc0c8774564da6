// The embedding_grad library kernel on a CUDA device: the kernels of
// cuda/embedding/EmbeddingGrad.cu launched through the driver API.
#include "cuda/CudaEmbeddingGrad.h"

#include "Fail.h"
#include "cuda/CudaDriver.h"
#include "cuda/embedding/EmbeddingGradParams.h"

#include <cstdint>
#include <memory>

#if MEGRT_CUDA_FATBINS
namespace megrt {
/// EmbeddingGrad.cu compiled by nvcc (sm_90 SASS and compute_90 PTX),
/// written into the build by EmbedFatbin.cmake.
extern const uint8_t kEmbeddingGradFatbin[];
extern const size_t kEmbeddingGradFatbinSize;
} // namespace megrt
#endif

namespace megrt {
namespace {

using embedding::EmbeddingGradParams;

constexpr const char *kKernels[] = {"megrt_embedding_grad_rank_i32",
                                    "megrt_embedding_grad_rank_i64",
                                    "megrt_embedding_grad_place_i32",
                                    "megrt_embedding_grad_place_i64",
                                    "megrt_embedding_grad_scan",
                                    "megrt_embedding_grad_sum_f32",
                                    "megrt_embedding_grad_sum_bf16",
                                    "megrt_embedding_grad_sum_f16",
                                    "megrt_embedding_grad_sum_vectors_f32",
                                    "megrt_embedding_grad_sum_vectors_bf16",
                                    "megrt_embedding_grad_sum_vectors_f16"};

/// Grid dimension x's limit.
constexpr int64_t kMaxGridX = 0x7fffffff;

unsigned blocks(int64_t count, int64_t perBlock) {
  return static_cast<unsigned>((count + perBlock - 1) / perBlock);
}

} // namespace

CudaEmbeddingGrad::CudaEmbeddingGrad(const CudaContext &context)
    : context_(context) {
#if !MEGRT_CUDA_FATBINS
  fail("this runtime was built without nvcc; the embedding gradient on CUDA "
       "is unavailable");
#else
  std::string what = concat("the embedding-gradient module (sm_90) on ",
                            context.description());
  if (context.computeMajor() < 9)
    fail(what, ": its kernels need compute capability 9.0 or newer");
  module_ = std::make_unique<EmbeddedModule>(context, kEmbeddingGradFatbin,
                                             kEmbeddingGradFatbinSize, what);
  for (const char *name : kKernels)
    functions_[name] = module_->function(name);
#endif
}

CudaEmbeddingGrad::~CudaEmbeddingGrad() = default;

CudaLibraryRun
CudaEmbeddingGrad::prepare(const LibraryCallInfo &call,
                           const std::vector<CUdeviceptr> &operands,
                           CUdeviceptr scratch) const {
  const LibraryKernelSignature &k = *call.kernel;
  EmbeddingGradShape shape = embeddingGradShape(call);
  CUdeviceptr grad = operands[k.operand("grad")];
  CUdeviceptr ids = operands[k.operand("ids")];
  CUdeviceptr firstRow = operands[k.operand("first_row")];
  CUdeviceptr table = operands[k.operand("table")];
  return [this, shape, grad, ids, firstRow, table, scratch](CUstream stream) {
    run(shape, grad, ids, firstRow, table, scratch, stream);
  };
}

std::unique_ptr<CudaLibraryKernel>
library::cuda_embedding_grad(const CudaContext &context) {
  return std::make_unique<CudaEmbeddingGrad>(context);
}

void CudaEmbeddingGrad::run(const EmbeddingGradShape &shape, CUdeviceptr grad,
                            CUdeviceptr ids, CUdeviceptr firstRow,
                            CUdeviceptr table, CUdeviceptr scratch,
                            CUstream stream) const {
  std::string what = describeEmbeddingGrad(shape);
  if (shape.vocab > kMaxGridX)
    fail(what, ": at most ", kMaxGridX, " rows are supported on CUDA");
  if (scratch % sizeof(int32_t) != 0)
    fail(what, ": the scratch at 0x", std::hex, scratch,
         " is not 4-byte aligned");
  EmbeddingGradScratch layout = embeddingGradScratch(shape);
  EmbeddingGradParams params{};
  params.grad = grad;
  params.ids = ids;
  params.table = table;
  params.firstRow = firstRow;
  params.offsets = scratch + layout.offsets * sizeof(int32_t);
  params.ranks = scratch + layout.ranks * sizeof(int32_t);
  params.order = scratch + layout.order * sizeof(int32_t);
  params.tokens = shape.tokens;
  params.vocab = shape.vocab;
  params.dim = shape.dim;

  context_.makeCurrent();
  const CudaDriver &driver = cudaDriver();
  checkCuda(driver.cuMemsetD8Async(params.offsets, 0,
                                   (shape.vocab + 1) * sizeof(int32_t), stream),
            "cuMemsetD8Async", what + ": zeroing the row offsets");
  const char *idsName = shape.wideIds ? "i64" : "i32";
  auto launch = [&](const std::string &name, unsigned grid, unsigned block) {
    void *arguments[] = {&params};
    checkCuda(driver.cuLaunchKernel(functions_.at(name), grid, 1, 1, block, 1,
                                    1, 0, stream, arguments, nullptr),
              "cuLaunchKernel",
              concat(what, ": kernel '", name, "' (grid ", grid, ")"));
  };
  unsigned tokenBlocks = blocks(shape.tokens, embedding::kThreads);
  launch(concat("megrt_embedding_grad_rank_", idsName), tokenBlocks,
         embedding::kThreads);
  launch("megrt_embedding_grad_scan", 1, embedding::kScanThreads);
  launch(concat("megrt_embedding_grad_place_", idsName), tokenBlocks,
         embedding::kThreads);
  // Rows of whole 16-byte vectors at 16-byte aligned addresses take the
  // vector kernel (the same sums in the same order).
  size_t element = elementSize(shape.dtype);
  bool vectors = (shape.dim * element) % embedding::kVectorBytes == 0 &&
                 grad % embedding::kVectorBytes == 0 &&
                 table % embedding::kVectorBytes == 0;
  launch(concat("megrt_embedding_grad_sum_", vectors ? "vectors_" : "",
                dtypeName(shape.dtype)),
         static_cast<unsigned>(shape.vocab), embedding::kThreads);
}

} // namespace megrt
