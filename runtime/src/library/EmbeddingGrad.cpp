// The embedding_grad library kernel: its checks, its scratch, and its CPU
// implementation (a deterministic scatter-add).
#include "library/EmbeddingGrad.h"

#include "FbTypes.h"
#include "cpu/ThreadPool.h"
#include "megrt/HalfFloat.h"
#include "megrt/Shape.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace megrt {
namespace {

/// Rows per unit of work: enough to amortise a unit, few enough to spread
/// a small table over the threads.
constexpr int64_t kRowsPerUnit = 16;

/// The row token t's id names, or -1 outside the table.
int64_t rowOf(const EmbeddingGradShape &s, const void *ids, int64_t t,
              int64_t first) {
  int64_t id = s.wideIds ? static_cast<const int64_t *>(ids)[t]
                         : static_cast<const int32_t *>(ids)[t];
  int64_t row = id - first;
  return row >= 0 && row < s.vocab ? row : -1;
}

/// sum[d] += grad row t, widened to f32.
void addRow(DType dtype, const void *grad, int64_t t, int64_t dim, float *sum) {
  if (dtype == DType::F32) {
    const float *row = static_cast<const float *>(grad) + t * dim;
    for (int64_t d = 0; d < dim; ++d)
      sum[d] += row[d];
    return;
  }
  const uint16_t *row = static_cast<const uint16_t *>(grad) + t * dim;
  if (dtype == DType::BF16) {
    // A bf16 is the high half of the f32 with the same value.
    for (int64_t d = 0; d < dim; ++d) {
      uint32_t bits = static_cast<uint32_t>(row[d]) << 16;
      float value;
      std::memcpy(&value, &bits, sizeof value);
      sum[d] += value;
    }
    return;
  }
  for (int64_t d = 0; d < dim; ++d)
    sum[d] += f16ToFloat(row[d]);
}

/// Table row r from the f32 sum, rounded to nearest even for 16 bits.
void storeRow(DType dtype, const float *sum, int64_t dim, void *table,
              int64_t r) {
  if (dtype == DType::F32) {
    std::memcpy(static_cast<float *>(table) + r * dim, sum,
                dim * sizeof(float));
    return;
  }
  uint16_t *row = static_cast<uint16_t *>(table) + r * dim;
  uint16_t (*convert)(float) = dtype == DType::BF16 ? floatToBf16 : floatToF16;
  for (int64_t d = 0; d < dim; ++d)
    row[d] = convert(sum[d]);
}

} // namespace

EmbeddingGradShape embeddingGradShape(const LibraryCallInfo &call) {
  return {call.param("tokens"), call.param("vocab"), call.param("dim"),
          call.dtype("table"), call.dtype("ids") == DType::I64};
}

namespace library {

/// Dimensions positive and small enough for the i32 sort, a floating-point
/// dtype, and every operand a buffer of its dtype and exactly its size.
void verify_embedding_grad(const LibraryCallInfo &call,
                           const std::string &where) {
  int64_t tokens = call.param("tokens"), vocab = call.param("vocab"),
          dim = call.param("dim");
  if (!isFloatingPoint(call.dtype("table")))
    fail(where, ": expected a floating-point table, found ",
         dtypeName(call.dtype("table")));
  if (tokens < 1 || vocab < 1 || dim < 1)
    fail(where, ": tokens ", tokens, ", vocab ", vocab, " and dim ", dim,
         " must be positive");
  if (vocab > kMaxEmbeddingGradScratch || tokens > kMaxEmbeddingGradScratch ||
      embeddingGradScratch(tokens, vocab).elements > kMaxEmbeddingGradScratch)
    fail(where, ": vocab ", vocab, " + 1 + 2 * tokens ", tokens,
         " must stay below 2^31");
  EmbeddingGradShape s = embeddingGradShape(call);
  auto operand = [&](const char *name, std::initializer_list<DType> dtypes,
                     int64_t rows, int64_t columns) {
    const fb::Buffer *buffer = call.buffer(name);
    if (!buffer)
      return;
    int64_t want;
    if (__builtin_mul_overflow(rows, columns, &want))
      fail(where, ": ", name, " size overflows");
    bool dtypeOk = false;
    for (DType dtype : dtypes)
      dtypeOk = dtypeOk || toDType(buffer->dtype()) == dtype;
    if (!dtypeOk || numElements(toShape(buffer->shape()), where) != want)
      fail(where, ": ", name, " (buffer ",
           call.operands[call.kernel->operand(name)], ", ",
           formatType(toDType(buffer->dtype()), toShape(buffer->shape())),
           ") is not ", want, " elements of ",
           dtypes.size() == 1 ? dtypeName(*dtypes.begin()) : "i32 or i64",
           " for ", describeEmbeddingGrad(s));
  };
  operand("grad", {s.dtype}, tokens, dim);
  operand("table", {s.dtype}, vocab, dim);
  operand("ids", {DType::I32, DType::I64}, tokens, 1);
  operand("first_row", {DType::I32}, 1, 1);
}

uint64_t scratch_embedding_grad(const LibraryCallInfo &call) {
  return static_cast<uint64_t>(
             embeddingGradScratch(call.param("tokens"), call.param("vocab"))
                 .elements) *
         sizeof(int32_t);
}

CpuLibraryRun cpu_embedding_grad(const LibraryCallInfo &call,
                                 const std::vector<void *> &operands,
                                 uint8_t *scratch) {
  const LibraryKernelSignature &k = *call.kernel;
  EmbeddingGradShape shape = embeddingGradShape(call);
  const void *grad = operands[k.operand("grad")];
  const void *ids = operands[k.operand("ids")];
  // Verification keeps every buffer's offset a multiple of its element
  // size, and the scratch is 64-byte aligned, so the i32 data are aligned.
  const auto *firstRow =
      static_cast<const int32_t *>(operands[k.operand("first_row")]);
  void *table = operands[k.operand("table")];
  auto *sort = reinterpret_cast<int32_t *>(scratch);
  return [=](ThreadPool &pool) {
    embeddingGrad(pool, shape, grad, ids, firstRow, table, sort);
  };
}

} // namespace library

void embeddingGrad(ThreadPool &pool, const EmbeddingGradShape &s,
                   const void *grad, const void *ids, const int32_t *firstRow,
                   void *table, int32_t *scratch) {
  EmbeddingGradScratch layout = embeddingGradScratch(s);
  int32_t *offsets = scratch + layout.offsets;
  int32_t *order = scratch + layout.order;
  int64_t first = firstRow ? *firstRow : 0;

  // Counts in offsets[row + 1], summed into each row's first position;
  // placing a token advances its row's offset to the next row's start, so
  // the offsets shift back by one row afterwards.
  std::fill(offsets, offsets + s.vocab + 1, 0);
  for (int64_t t = 0; t < s.tokens; ++t)
    if (int64_t row = rowOf(s, ids, t, first); row >= 0)
      ++offsets[row + 1];
  for (int64_t r = 1; r <= s.vocab; ++r)
    offsets[r] += offsets[r - 1];
  for (int64_t t = 0; t < s.tokens; ++t)
    if (int64_t row = rowOf(s, ids, t, first); row >= 0)
      order[offsets[row]++] = static_cast<int32_t>(t);
  for (int64_t r = s.vocab; r > 0; --r)
    offsets[r] = offsets[r - 1];
  offsets[0] = 0;

  size_t elementBytes = s.dtype == DType::F32 ? 4 : 2;
  int64_t units = (s.vocab + kRowsPerUnit - 1) / kRowsPerUnit;
  pool.parallelFor(static_cast<uint32_t>(units), [&](uint32_t unit) {
    std::vector<float> sum(s.dim);
    int64_t end = std::min(s.vocab, (unit + 1) * kRowsPerUnit);
    for (int64_t r = unit * kRowsPerUnit; r < end; ++r) {
      if (offsets[r] == offsets[r + 1]) {
        // Zero bits are 0.0 in every float format.
        std::memset(static_cast<uint8_t *>(table) + r * s.dim * elementBytes, 0,
                    s.dim * elementBytes);
        continue;
      }
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int32_t i = offsets[r]; i < offsets[r + 1]; ++i)
        addRow(s.dtype, grad, order[i], s.dim, sum.data());
      storeRow(s.dtype, sum.data(), s.dim, table, r);
    }
  });
}

} // namespace megrt
