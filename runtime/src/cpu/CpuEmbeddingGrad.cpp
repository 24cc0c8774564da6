// The embedding gradient on the CPU: a deterministic scatter-add.
#include "cpu/CpuEmbeddingGrad.h"

#include "cpu/ThreadPool.h"
#include "megrt/HalfFloat.h"

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
