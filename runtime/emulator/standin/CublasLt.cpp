// The stand-in cuBLASLt: the calls megrt makes (runtime/src/cuda/
// CublasLt.def), with cublasLt.h's prototypes. A matrix product runs on
// the host in double precision and is rounded once to the output type:
// D = alpha op(A) op(B) + beta C, column-major, batched with strides, with
// the bias and GELU epilogues. Every operand must lie in one allocation,
// and the alignments the runtime promised in the preference must hold.
#include "Standin.h"

#include "megrt/HalfFloat.h"

#include <cublasLt.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace megemu::standin {
namespace {

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
};

struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  uint32_t alignA = 256, alignB = 256, alignC = 256, alignD = 256;
};

size_t bytesOf(cudaDataType_t type) {
  return type == CUDA_R_32F ? 4 : 2;
}

double load(cudaDataType_t type, const uint8_t *data, uint64_t index) {
  if (type == CUDA_R_32F) {
    float v;
    std::memcpy(&v, data + 4 * index, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, data + 2 * index, 2);
  return type == CUDA_R_16BF ? megrt::bf16ToFloat(bits)
                             : megrt::f16ToFloat(bits);
}

/// Rounds the double once to f32 and, for a 16-bit type, once more (to
/// nearest even): as a GEMM with f32 accumulation rounds its output.
void store(cudaDataType_t type, uint8_t *data, uint64_t index, double value) {
  float f = static_cast<float>(value);
  if (type == CUDA_R_32F) {
    std::memcpy(data + 4 * index, &f, 4);
    return;
  }
  uint16_t out =
      type == CUDA_R_16BF ? megrt::floatToBf16(f) : megrt::floatToF16(f);
  std::memcpy(data + 2 * index, &out, 2);
}

double gelu(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

cublasStatus_t invalid(const std::string &message) {
  State::get().fail(CUDA_ERROR_INVALID_VALUE, "cuBLASLt: " + message);
  return CUBLAS_STATUS_INVALID_VALUE;
}

/// The bytes a batched column-major operand spans from its pointer.
uint64_t spanOf(const Layout &layout) {
  uint64_t last = (layout.cols - 1) * layout.ld + layout.rows;
  return (last + (layout.batch - 1) * uint64_t(layout.stride)) *
         bytesOf(layout.type);
}

} // namespace
} // namespace megemu::standin

using namespace megemu::standin;

extern "C" {

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

const char *cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

const char *cublasLtGetStatusString(cublasStatus_t status) {
  if (status != CUBLAS_STATUS_SUCCESS && !State::get().message().empty())
    return State::get().message().c_str();
  return cublasLtGetStatusName(status);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<int *>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
    return invalid("compute type " + std::to_string(compute) +
                   " / scale type " + std::to_string(scale) +
                   ": megrt computes in f32 (CUBLAS_COMPUTE_32F, CUDA_R_32F)");
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(
      new MatmulDesc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<MatmulDesc *>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t handle,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *value, size_t size) {
  auto *desc = reinterpret_cast<MatmulDesc *>(handle);
  auto read = [&](auto &field) {
    if (size != sizeof(field))
      return invalid("matmul attribute " + std::to_string(attribute) +
                     " of " + std::to_string(size) + " bytes");
    std::memcpy(&field, value, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return read(desc->transA);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return read(desc->transB);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return read(desc->epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return read(desc->bias);
  default:
    return invalid("matmul attribute " + std::to_string(attribute) +
                   " is not one the stand-in knows");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (type != CUDA_R_32F && type != CUDA_R_16BF && type != CUDA_R_16F)
    return invalid("layout type " + std::to_string(type));
  if (ld < static_cast<int64_t>(rows))
    return invalid("leading dimension " + std::to_string(ld) + " below " +
                   std::to_string(rows) + " rows");
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t handle,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *value, size_t size) {
  auto *layout = reinterpret_cast<Layout *>(handle);
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4) {
    std::memcpy(&layout->batch, value, 4);
    return layout->batch >= 1 ? CUBLAS_STATUS_SUCCESS
                              : invalid("batch count below 1");
  }
  if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && size == 8) {
    std::memcpy(&layout->stride, value, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  return invalid("layout attribute " + std::to_string(attribute) + " of " +
                 std::to_string(size) + " bytes");
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete reinterpret_cast<Preference *>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t handle,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *value,
    size_t size) {
  auto *preference = reinterpret_cast<Preference *>(handle);
  uint32_t *field = nullptr;
  switch (attribute) {
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    field = &preference->alignA;
    break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    field = &preference->alignB;
    break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    field = &preference->alignC;
    break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    field = &preference->alignD;
    break;
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
  case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    return CUBLAS_STATUS_SUCCESS;
  default:
    return invalid("preference attribute " + std::to_string(attribute));
  }
  if (size != 4)
    return invalid("alignment preference of " + std::to_string(size) +
                   " bytes");
  std::memcpy(field, value, 4);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t preference,
    int requested, cublasLtMatmulHeuristicResult_t *results, int *found) {
  if (!desc || !a || !b || !c || !d || !preference || requested < 1)
    return invalid("cublasLtMatmulAlgoGetHeuristic with a null argument");
  std::memset(results, 0, sizeof(*results));
  // The algorithm remembers the alignments the runtime promised, which
  // every product that uses it is checked against.
  static_assert(sizeof(results->algo.data) >= sizeof(Preference));
  std::memcpy(results->algo.data, preference, sizeof(Preference));
  results->state = CUBLAS_STATUS_SUCCESS;
  results->wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t handle,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t layoutA, const void *B,
                              cublasLtMatrixLayout_t layoutB, const void *beta,
                              const void *C, cublasLtMatrixLayout_t layoutC,
                              void *D, cublasLtMatrixLayout_t layoutD,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t,
                              cudaStream_t stream) {
  State &state = State::get();
  std::lock_guard<std::recursive_mutex> lock(state.mutex);
  const MatmulDesc desc = *reinterpret_cast<MatmulDesc *>(handle);
  const Layout la = *reinterpret_cast<Layout *>(layoutA),
               lb = *reinterpret_cast<Layout *>(layoutB),
               lc = *reinterpret_cast<Layout *>(layoutC),
               ld = *reinterpret_cast<Layout *>(layoutD);
  Preference promised;
  std::memcpy(&promised, algo->data, sizeof(promised));
  uint64_t m = desc.transA == CUBLAS_OP_N ? la.rows : la.cols;
  uint64_t k = desc.transA == CUBLAS_OP_N ? la.cols : la.rows;
  uint64_t kb = desc.transB == CUBLAS_OP_N ? lb.rows : lb.cols;
  uint64_t n = desc.transB == CUBLAS_OP_N ? lb.cols : lb.rows;
  if (k != kb || lc.rows != m || lc.cols != n || ld.rows != m ||
      ld.cols != n || la.batch != ld.batch || lb.batch != ld.batch ||
      lc.batch != ld.batch)
    return invalid("operand shapes do not chain: op(A) " + std::to_string(m) +
                   "x" + std::to_string(k) + ", op(B) " + std::to_string(kb) +
                   "x" + std::to_string(n) + ", D " + std::to_string(ld.rows) +
                   "x" + std::to_string(ld.cols));
  struct Operand {
    const char *name;
    const void *pointer;
    const Layout &layout;
    uint32_t alignment;
  } operands[] = {{"A", A, la, promised.alignA},
                  {"B", B, lb, promised.alignB},
                  {"C", C, lc, promised.alignC},
                  {"D", D, ld, promised.alignD}};
  for (const Operand &operand : operands) {
    auto address = reinterpret_cast<uint64_t>(operand.pointer);
    if (!state.holds(address, spanOf(operand.layout)))
      return invalid(std::string("operand ") + operand.name + " at 0x" +
                     [&] {
                       std::ostringstream os;
                       os << std::hex << address;
                       return os.str();
                     }() +
                     " spans " + std::to_string(spanOf(operand.layout)) +
                     " bytes, outside every allocation");
    if (address % operand.alignment != 0)
      return invalid(std::string("operand ") + operand.name +
                     " is not aligned to the " +
                     std::to_string(operand.alignment) +
                     " bytes the preference promised");
  }
  bool withBias = desc.epilogue == CUBLASLT_EPILOGUE_BIAS ||
                  desc.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (withBias &&
      !state.holds(reinterpret_cast<uint64_t>(desc.bias), m * bytesOf(ld.type)))
    return invalid("the bias of " + std::to_string(m) +
                   " elements is outside every allocation");
  float alphaValue, betaValue;
  std::memcpy(&alphaValue, alpha, 4);
  std::memcpy(&betaValue, beta, 4);
  CUresult result = state.enqueue(
      reinterpret_cast<CUstream>(stream), "cublasLtMatmul", [=] {
        auto *a = static_cast<const uint8_t *>(A);
        auto *b = static_cast<const uint8_t *>(B);
        auto *c = static_cast<const uint8_t *>(C);
        auto *d = static_cast<uint8_t *>(D);
        auto *bias = static_cast<const uint8_t *>(desc.bias);
        for (int32_t batch = 0; batch < ld.batch; ++batch)
          for (uint64_t col = 0; col < n; ++col)
            for (uint64_t row = 0; row < m; ++row) {
              double sum = 0;
              for (uint64_t i = 0; i < k; ++i) {
                uint64_t ai = desc.transA == CUBLAS_OP_N
                                  ? i * la.ld + row
                                  : row * la.ld + i;
                uint64_t bi = desc.transB == CUBLAS_OP_N
                                  ? col * lb.ld + i
                                  : i * lb.ld + col;
                sum += load(la.type, a, batch * la.stride + ai) *
                       load(lb.type, b, batch * lb.stride + bi);
              }
              double value = alphaValue * sum;
              if (betaValue != 0)
                value += betaValue *
                         load(lc.type, c, batch * lc.stride + col * lc.ld + row);
              if (withBias)
                value += load(ld.type, bias, row);
              if (desc.epilogue == CUBLASLT_EPILOGUE_GELU ||
                  desc.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS)
                value = gelu(value);
              store(ld.type, d, batch * ld.stride + col * ld.ld + row, value);
            }
        return CUDA_SUCCESS;
      });
  return result == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                                : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // extern "C"
