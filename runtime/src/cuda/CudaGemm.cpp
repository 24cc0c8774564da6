// GEMM on a CUDA device through cuBLASLt.
#include "cuda/CudaGemm.h"

#include "Fail.h"

#include <cstdint>
#include <limits>

namespace megrt {
namespace {

cudaDataType cudaTypeOf(DType dtype, const std::string &where) {
  switch (dtype) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    fail(where, ": gemm dtype ", dtypeName(dtype),
         " is not supported on CUDA (expected f32, bf16 or f16)");
  }
}

void *pointer(CUdeviceptr address) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
}

/// The alignment cuBLASLt may assume for an operand: the largest power of
/// two up to 256 dividing its address and, with several batches, the byte
/// distance between them. Buffers at arbitrary element offsets in the arena
/// are common, and the default preference (256) would pick kernels that
/// fault on them.
uint32_t alignmentOf(CUdeviceptr address, int64_t batch, int64_t strideBytes) {
  uint64_t bits = address;
  if (batch > 1)
    bits |= static_cast<uint64_t>(strideBytes);
  uint32_t alignment = 256;
  while (alignment > 1 && bits % alignment != 0)
    alignment /= 2;
  return alignment;
}

template <typename T>
void setDescAttribute(cublasLtMatmulDesc_t desc,
                      cublasLtMatmulDescAttributes_t attribute, const T &value,
                      const std::string &where) {
  checkCublas(cublasLt().cublasLtMatmulDescSetAttribute(desc, attribute, &value,
                                                        sizeof(T)),
              "cublasLtMatmulDescSetAttribute", where);
}

struct DestroyPreference {
  void operator()(cublasLtMatmulPreferenceOpaque_t *preference) const {
    cublasLt().cublasLtMatmulPreferenceDestroy(preference);
  }
};

} // namespace

void CudaGemm::DestroyDesc::operator()(cublasLtMatmulDescOpaque_t *desc) const {
  cublasLt().cublasLtMatmulDescDestroy(desc);
}

void CudaGemm::DestroyLayout::operator()(
    cublasLtMatrixLayoutOpaque_t *layout) const {
  cublasLt().cublasLtMatrixLayoutDestroy(layout);
}

CudaGemm::CudaGemm(const GemmParams &params, CUdeviceptr a, CUdeviceptr b,
                   CUdeviceptr c, CUdeviceptr bias,
                   const CublasLtContext &cublas, std::string where)
    : params_(params), a_(a), b_(b), c_(c), bias_(bias), cublas_(cublas),
      where_(std::move(where)) {
  const CublasLtLibrary &lt = cublasLt();
  const GemmParams &p = params_;
  cudaDataType type = cudaTypeOf(p.dtype, where_);
  if (p.batch > std::numeric_limits<int32_t>::max())
    fail(where_, ": batch ", p.batch, " exceeds cuBLASLt's limit of ",
         std::numeric_limits<int32_t>::max());

  cublasLtMatmulDesc_t desc = nullptr;
  // CUBLAS_COMPUTE_32F keeps f32 products in full f32 (TF32 must be asked
  // for), as the CPU backend computes them.
  checkCublas(
      lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate", where_);
  desc_.reset(desc);
  // Stored row-major, our B is its own transpose read column-major: the
  // cuBLASLt "A" operand needs no transpose unless B was transposed.
  cublasOperation_t opA = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  setDescAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, opA, where_);
  setDescAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, opB, where_);
  if (p.geluEpilogue && !bias_)
    setDescAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                     CUBLASLT_EPILOGUE_GELU, where_);
  if (bias_) {
    // The bias runs along the rows of the column-major C^T (n of them) and
    // is broadcast over its columns and batches (bias batch stride 0).
    setDescAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                     p.geluEpilogue ? CUBLASLT_EPILOGUE_GELU_BIAS
                                    : CUBLASLT_EPILOGUE_BIAS,
                     where_);
    const void *biasPointer = pointer(bias_);
    setDescAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasPointer,
                     where_);
  }

  // Column-major shapes of the stored matrices (before op).
  layoutA_ = p.transB ? layout(type, p.k, p.n, p.batch, p.strideB, "B")
                      : layout(type, p.n, p.k, p.batch, p.strideB, "B");
  layoutB_ = p.transA ? layout(type, p.m, p.k, p.batch, p.strideA, "A")
                      : layout(type, p.k, p.m, p.batch, p.strideA, "A");
  layoutC_ = layout(type, p.n, p.m, p.batch, p.strideC, "C");
  chooseAlgorithm();
}

CudaGemm::Layout CudaGemm::layout(cudaDataType type, int64_t rows, int64_t cols,
                                  int64_t batch, int64_t stride,
                                  const char *role) const {
  const CublasLtLibrary &lt = cublasLt();
  std::string where = concat(where_, ", operand ", role);
  cublasLtMatrixLayout_t created = nullptr;
  // Column-major and dense: the leading dimension is the row count.
  checkCublas(lt.cublasLtMatrixLayoutCreate(&created, type,
                                            static_cast<uint64_t>(rows),
                                            static_cast<uint64_t>(cols), rows),
              "cublasLtMatrixLayoutCreate", where);
  Layout owned(created);
  if (batch > 1) {
    auto count = static_cast<int32_t>(batch);
    checkCublas(
        lt.cublasLtMatrixLayoutSetAttribute(
            created, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
        "cublasLtMatrixLayoutSetAttribute", where);
    // In elements; 0 repeats one matrix for every batch.
    checkCublas(lt.cublasLtMatrixLayoutSetAttribute(
                    created, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride, sizeof(stride)),
                "cublasLtMatrixLayoutSetAttribute", where);
  }
  return owned;
}

void CudaGemm::chooseAlgorithm() {
  const CublasLtLibrary &lt = cublasLt();
  const GemmParams &p = params_;
  cublasLtMatmulPreference_t created = nullptr;
  checkCublas(lt.cublasLtMatmulPreferenceCreate(&created),
              "cublasLtMatmulPreferenceCreate", where_);
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DestroyPreference>
      preference(created);
  auto setPreference = [&](cublasLtMatmulPreferenceAttributes_t attribute,
                           const auto &value) {
    checkCublas(lt.cublasLtMatmulPreferenceSetAttribute(created, attribute,
                                                        &value, sizeof(value)),
                "cublasLtMatmulPreferenceSetAttribute", where_);
  };
  uint64_t workspaceBytes = CublasLtContext::kWorkspaceBytes;
  setPreference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspaceBytes);
  // The runtime's policy is f32 math with one rounding of the output, as
  // on the CPU. Split-K reduced in place or in output-type workspace rounds
  // every partial sum to bf16/f16 (several ulps off after cancellation), so
  // only split-K with f32 partials in the workspace, or none, is allowed.
  uint32_t reductionSchemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  setPreference(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reductionSchemes);
  size_t elementBytes = elementSize(p.dtype);
  uint32_t alignA = alignmentOf(b_, p.batch, p.strideB * elementBytes);
  uint32_t alignB = alignmentOf(a_, p.batch, p.strideA * elementBytes);
  uint32_t alignC = alignmentOf(c_, p.batch, p.strideC * elementBytes);
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA);
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB);
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC);
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC);

  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t status = lt.cublasLtMatmulAlgoGetHeuristic(
      cublas_.handle(), desc_.get(), layoutA_.get(), layoutB_.get(),
      layoutC_.get(), layoutC_.get(), created, 1, &result, &found);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED)
    checkCublas(status, "cublasLtMatmulAlgoGetHeuristic", where_);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || found < 1 ||
      result.state != CUBLAS_STATUS_SUCCESS)
    fail(where_, ": cuBLASLt has no algorithm for m=", p.m, " n=", p.n,
         " k=", p.k, " batch=", p.batch, " dtype=", dtypeName(p.dtype),
         p.transA ? " transA" : "", p.transB ? " transB" : "",
         bias_ ? " with bias" : "", " (operand alignments A=", alignB,
         " B=", alignA, " C=", alignC, " bytes)");
  algorithm_ = result.algo;
}

void CudaGemm::run(CUstream stream) const {
  const GemmParams &p = params_;
  checkCublas(cublasLt().cublasLtMatmul(
                  cublas_.handle(), desc_.get(), &p.alpha, pointer(b_),
                  layoutA_.get(), pointer(a_), layoutB_.get(), &p.beta,
                  pointer(c_), layoutC_.get(), pointer(c_), layoutC_.get(),
                  &algorithm_, pointer(cublas_.workspace()),
                  CublasLtContext::kWorkspaceBytes, stream),
              "cublasLtMatmul", where_);
}

} // namespace megrt
