// Fused scaled-dot-product attention on the CPU, forward and backward, in
// tiles: the products of a tile are matrix products (matmulTile), the
// softmax is vectorized, and the tiles run on the device's threads.
#include "cpu/CpuAttention.h"

#include "cpu/ThreadPool.h"
#include "cpu/TileMath.h"
#include "megrt/HalfFloat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace megrt {
namespace {

/// Query rows per tile, and keys per block of a tile's scores: a 64 x 256
/// f32 score block (64 KB) and its operands stay in the core's L2.
constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyBlock = 256;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// A row's log-sum-exp from its online softmax's maximum and sum (of
/// exp(score - max)); +inf for a row that saw no key, so that its
/// probabilities exp(score - lse) are zero.
float logSumExp(float rowMax, float rowSum) {
  return rowSum > 0.0f ? rowMax + std::log(rowSum)
                       : std::numeric_limits<float>::infinity();
}

/// Element offsets in the bshd layout, and the causal mask.
class Layout {
public:
  Layout(const AttentionShape &s, const int32_t *positions)
      : s_(s), positions_(positions) {}

  int64_t query(int64_t b, int64_t i, int64_t h) const {
    return ((b * s_.seqQ + i) * s_.heads + h) * s_.headDim;
  }
  int64_t output(int64_t b, int64_t i, int64_t h) const {
    return ((b * s_.seqQ + i) * s_.heads + h) * s_.valueDim;
  }
  int64_t key(int64_t b, int64_t j, int64_t g) const {
    return ((b * s_.seqKv + j) * s_.kvHeads + g) * s_.headDim;
  }
  int64_t value(int64_t b, int64_t j, int64_t g) const {
    return ((b * s_.seqKv + j) * s_.kvHeads + g) * s_.valueDim;
  }
  /// The softmax statistic of query i of head h: [batch][heads][seqQ].
  int64_t statistic(int64_t b, int64_t h, int64_t i) const {
    return (b * s_.heads + h) * s_.seqQ + i;
  }
  /// Distance between consecutive rows of one head.
  int64_t queryStride() const { return s_.heads * s_.headDim; }
  int64_t outputStride() const { return s_.heads * s_.valueDim; }
  int64_t keyStride() const { return s_.kvHeads * s_.headDim; }
  int64_t valueStride() const { return s_.kvHeads * s_.valueDim; }
  /// Query heads per KV head.
  int64_t group() const { return s_.heads / s_.kvHeads; }
  /// How many keys (a prefix) query i sees: all, or with `causal` those up
  /// to its position (positions[i], or i + seqKv - seqQ).
  int64_t visibleKeys(int64_t i) const {
    if (!s_.causal)
      return s_.seqKv;
    int64_t position = positions_ ? positions_[i] : i + s_.seqKv - s_.seqQ;
    return std::clamp<int64_t>(position + 1, 0, s_.seqKv);
  }

private:
  const AttentionShape &s_;
  const int32_t *positions_;
};

/// A query tile sees the keys its last row sees, so the positions must not
/// decrease.
void checkPositions(const AttentionShape &s, const int32_t *positions) {
  if (!positions)
    return;
  if (!s.causal)
    fail(describeAttention(s), ": query positions without the causal mask");
  for (int64_t i = 1; i < s.seqQ; ++i)
    if (positions[i] < positions[i - 1])
      fail(describeAttention(s), ": query positions must not decrease, but ",
           "query ", i, " is at ", positions[i], " after ", positions[i - 1]);
}

/// `rows` rows of `width` elements, `stride` apart from element `offset` of
/// a tensor, as f32: the tensor itself for f32 (with its stride), a widened
/// packed copy in `buffer` otherwise.
struct Rows {
  const float *data = nullptr;
  int64_t stride = 0;
};
Rows readRows(DType dtype, const void *tensor, int64_t offset, int64_t rows,
              int64_t width, int64_t stride, std::vector<float> &buffer) {
  if (dtype == DType::F32)
    return {static_cast<const float *>(tensor) + offset, stride};
  buffer.resize(rows * width);
  const uint16_t *bits = static_cast<const uint16_t *>(tensor) + offset;
  float (*convert)(uint16_t) = dtype == DType::BF16 ? bf16ToFloat : f16ToFloat;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      buffer[r * width + c] = convert(bits[r * stride + c]);
  return {buffer.data(), width};
}

/// Writes `rows` x `width` f32 values (`ld` apart) to rows `stride` apart
/// from element `offset` of a tensor, rounding to nearest even for 16 bits.
void writeRows(DType dtype, const float *values, int64_t ld, int64_t rows,
               int64_t width, void *tensor, int64_t offset, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = values + r * ld;
    if (dtype == DType::F32) {
      std::memcpy(static_cast<float *>(tensor) + offset + r * stride, row,
                  width * sizeof(float));
      continue;
    }
    uint16_t *bits = static_cast<uint16_t *>(tensor) + offset + r * stride;
    uint16_t (*convert)(float) =
        dtype == DType::BF16 ? floatToBf16 : floatToF16;
    for (int64_t c = 0; c < width; ++c)
      bits[c] = convert(row[c]);
  }
}

/// Keys [k0, k0 + count) of KV head g of batch b, as f32 rows, and their
/// values unless `values` is null (buffers as readRows').
struct KeyBlock {
  Rows keys, values;
};
KeyBlock readKeyBlock(const AttentionShape &s, const Layout &layout,
                      const void *k, const void *v, int64_t b, int64_t g,
                      int64_t k0, int64_t count, std::vector<float> &kBuffer,
                      std::vector<float> &vBuffer) {
  KeyBlock block;
  block.keys = readRows(s.dtype, k, layout.key(b, k0, g), count, s.headDim,
                        layout.keyStride(), kBuffer);
  if (v)
    block.values = readRows(s.dtype, v, layout.value(b, k0, g), count,
                            s.valueDim, layout.valueStride(), vBuffer);
  return block;
}

/// A query tile: rows [first, first + count) of one head, and the keys the
/// last of them sees.
struct QueryTile {
  int64_t first, count, keyEnd;
};

QueryTile queryTile(const Layout &layout, const AttentionShape &s,
                    int64_t index) {
  int64_t first = index * kQueryTile;
  int64_t count = std::min(kQueryTile, s.seqQ - first);
  return {first, count, layout.visibleKeys(first + count - 1)};
}

int64_t queryTiles(const AttentionShape &s) {
  return (s.seqQ + kQueryTile - 1) / kQueryTile;
}

/// Keys [k0, k0 + keys) of a block that row r of the tile sees.
int64_t visibleInBlock(const Layout &layout, const QueryTile &tile, int64_t r,
                       int64_t k0, int64_t keys) {
  return std::clamp<int64_t>(layout.visibleKeys(tile.first + r) - k0, 0, keys);
}

/// One query tile of the forward: online softmax over key blocks.
void forwardTile(const AttentionShape &s, const Layout &layout, const void *q,
                 const void *k, const void *v, void *out, float *stats,
                 int64_t b, int64_t h, const QueryTile &tile) {
  int64_t g = h / layout.group();
  // Each thread's buffers, kept from tile to tile: the scores are written
  // before they are read, the rest is reset here.
  thread_local std::vector<float> qBuffer, kBuffer, vBuffer, scores, acc,
      rowMax, rowSum;
  scores.resize(kQueryTile * kKeyBlock);
  acc.assign(tile.count * s.valueDim, 0.0f);
  rowMax.assign(tile.count, kNegInf);
  rowSum.assign(tile.count, 0.0f);
  Rows queries = readRows(s.dtype, q, layout.query(b, tile.first, h),
                          tile.count, s.headDim, layout.queryStride(), qBuffer);
  for (int64_t k0 = 0; k0 < tile.keyEnd; k0 += kKeyBlock) {
    int64_t keys = std::min(kKeyBlock, tile.keyEnd - k0);
    auto [keyRows, valueRows] =
        readKeyBlock(s, layout, k, v, b, g, k0, keys, kBuffer, vBuffer);
    // scores = scale * Q K^T
    matmulTile(false, true, tile.count, keys, s.headDim, s.scale, queries.data,
               queries.stride, keyRows.data, keyRows.stride, 0.0f,
               scores.data(), kKeyBlock);
    for (int64_t r = 0; r < tile.count; ++r) {
      float *row = &scores[r * kKeyBlock];
      int64_t visible = visibleInBlock(layout, tile, r, k0, keys);
      float *accRow = &acc[r * s.valueDim];
      if (visible == 0) {
        std::fill(row, row + keys, 0.0f);
        continue;
      }
      float newMax = std::max(rowMax[r], maxOf(row, visible));
      // The old maximum is -inf only before the row's first keys, when its
      // accumulations are all zero: the factor 0 is then harmless.
      float rescale = std::exp(rowMax[r] - newMax);
      float blockSum = expShiftedSum(row, visible, newMax);
      std::fill(row + visible, row + keys, 0.0f);
      rowSum[r] = rowSum[r] * rescale + blockSum;
      rowMax[r] = newMax;
      scaleRow(accRow, s.valueDim, rescale);
    }
    // acc += P V
    matmulTile(false, false, tile.count, s.valueDim, keys, 1.0f, scores.data(),
               kKeyBlock, valueRows.data, valueRows.stride, 1.0f, acc.data(),
               s.valueDim);
  }
  for (int64_t r = 0; r < tile.count; ++r)
    scaleRow(&acc[r * s.valueDim], s.valueDim,
             rowSum[r] > 0.0f ? 1.0f / rowSum[r] : 0.0f);
  writeRows(s.dtype, acc.data(), s.valueDim, tile.count, s.valueDim, out,
            layout.output(b, tile.first, h), layout.outputStride());
  if (stats)
    for (int64_t r = 0; r < tile.count; ++r)
      stats[layout.statistic(b, h, tile.first + r)] =
          logSumExp(rowMax[r], rowSum[r]);
}

/// The log-sum-exp of each row of a query tile of head h (KV head g),
/// computed block by block as forwardTile computes it, so the same bits;
/// `probs` and `kBuffer` are the caller's work space.
void rowStatistics(const AttentionShape &s, const Layout &layout, const void *k,
                   const Rows &queries, int64_t b, int64_t g,
                   const QueryTile &tile, std::vector<float> &probs,
                   std::vector<float> &kBuffer, std::vector<float> &lse) {
  std::vector<float> rowMax(tile.count, kNegInf), rowSum(tile.count, 0.0f);
  std::vector<float> unusedValues;
  for (int64_t k0 = 0; k0 < tile.keyEnd; k0 += kKeyBlock) {
    int64_t keys = std::min(kKeyBlock, tile.keyEnd - k0);
    Rows keyRows = readKeyBlock(s, layout, k, nullptr, b, g, k0, keys, kBuffer,
                                unusedValues)
                       .keys;
    matmulTile(false, true, tile.count, keys, s.headDim, s.scale, queries.data,
               queries.stride, keyRows.data, keyRows.stride, 0.0f, probs.data(),
               kKeyBlock);
    for (int64_t r = 0; r < tile.count; ++r) {
      int64_t visible = visibleInBlock(layout, tile, r, k0, keys);
      if (visible == 0)
        continue;
      float *row = &probs[r * kKeyBlock];
      float newMax = std::max(rowMax[r], maxOf(row, visible));
      float blockSum = expShiftedSum(row, visible, newMax);
      rowSum[r] = rowSum[r] * std::exp(rowMax[r] - newMax) + blockSum;
      rowMax[r] = newMax;
    }
  }
  for (int64_t r = 0; r < tile.count; ++r)
    lse[r] = logSumExp(rowMax[r], rowSum[r]);
}

/// The backward of one (batch, query head): dq of its rows, and its
/// contribution added to the f32 sums of dk and dv of its KV head in
/// `dkHead`, `dvHead` (seqKv rows each).
void backwardHead(const AttentionShape &s, const Layout &layout,
                  const void *dout, const void *q, const void *k, const void *v,
                  const void *out, const float *stats, void *dq, int64_t b,
                  int64_t h, float *dkHead, float *dvHead) {
  int64_t g = h / layout.group();
  std::vector<float> qBuffer, dBuffer, oBuffer, kBuffer, vBuffer;
  std::vector<float> probs(kQueryTile * kKeyBlock), dp(kQueryTile * kKeyBlock);
  std::vector<float> lse(kQueryTile), delta(kQueryTile);
  std::vector<float> dqTile(kQueryTile * s.headDim);
  for (int64_t t = 0; t < queryTiles(s); ++t) {
    QueryTile tile = queryTile(layout, s, t);
    Rows queries =
        readRows(s.dtype, q, layout.query(b, tile.first, h), tile.count,
                 s.headDim, layout.queryStride(), qBuffer);
    Rows grads =
        readRows(s.dtype, dout, layout.output(b, tile.first, h), tile.count,
                 s.valueDim, layout.outputStride(), dBuffer);
    Rows outs =
        readRows(s.dtype, out, layout.output(b, tile.first, h), tile.count,
                 s.valueDim, layout.outputStride(), oBuffer);
    // delta = rowsum(dout * out) = rowsum(P * dP), the term that the
    // softmax's Jacobian subtracts.
    for (int64_t r = 0; r < tile.count; ++r)
      delta[r] = dotRow(grads.data + r * grads.stride,
                        outs.data + r * outs.stride, s.valueDim);

    // The forward's log-sum-exp of each row: given, or recomputed block by
    // block as the forward computed it.
    if (stats) {
      for (int64_t r = 0; r < tile.count; ++r)
        lse[r] = stats[layout.statistic(b, h, tile.first + r)];
    } else {
      rowStatistics(s, layout, k, queries, b, g, tile, probs, kBuffer, lse);
    }

    std::fill(dqTile.begin(), dqTile.end(), 0.0f);
    for (int64_t k0 = 0; k0 < tile.keyEnd; k0 += kKeyBlock) {
      int64_t keys = std::min(kKeyBlock, tile.keyEnd - k0);
      auto [keyRows, valueRows] =
          readKeyBlock(s, layout, k, v, b, g, k0, keys, kBuffer, vBuffer);
      // P = exp(scale * Q K^T - lse)
      matmulTile(false, true, tile.count, keys, s.headDim, s.scale,
                 queries.data, queries.stride, keyRows.data, keyRows.stride,
                 0.0f, probs.data(), kKeyBlock);
      for (int64_t r = 0; r < tile.count; ++r) {
        float *row = &probs[r * kKeyBlock];
        int64_t visible = visibleInBlock(layout, tile, r, k0, keys);
        if (std::isinf(lse[r]))
          visible = 0;
        expShiftedSum(row, visible, lse[r]);
        std::fill(row + visible, row + keys, 0.0f);
      }
      // dv += P^T dout; dP = dout V^T
      matmulTile(true, false, keys, s.valueDim, tile.count, 1.0f, probs.data(),
                 kKeyBlock, grads.data, grads.stride, 1.0f,
                 dvHead + k0 * s.valueDim, s.valueDim);
      matmulTile(false, true, tile.count, keys, s.valueDim, 1.0f, grads.data,
                 grads.stride, valueRows.data, valueRows.stride, 0.0f,
                 dp.data(), kKeyBlock);
      // dS = P * (dP - delta); the scale of the scores carries into dq and
      // dk.
      for (int64_t r = 0; r < tile.count; ++r)
        softmaxGradRow(&probs[r * kKeyBlock], &dp[r * kKeyBlock], keys,
                       delta[r], s.scale);
      // dq += dS K; dk += dS^T Q
      matmulTile(false, false, tile.count, s.headDim, keys, 1.0f, probs.data(),
                 kKeyBlock, keyRows.data, keyRows.stride, 1.0f, dqTile.data(),
                 s.headDim);
      matmulTile(true, false, keys, s.headDim, tile.count, 1.0f, probs.data(),
                 kKeyBlock, queries.data, queries.stride, 1.0f,
                 dkHead + k0 * s.headDim, s.headDim);
    }
    writeRows(s.dtype, dqTile.data(), s.headDim, tile.count, s.headDim, dq,
              layout.query(b, tile.first, h), layout.queryStride());
  }
}

} // namespace

void attentionForward(ThreadPool &pool, const AttentionShape &s, const void *q,
                      const void *k, const void *v, void *out, float *stats,
                      const int32_t *positions) {
  checkAttentionShape(s);
  checkPositions(s, positions);
  Layout layout(s, positions);
  int64_t tiles = queryTiles(s);
  // A unit is one query tile of every query head of a KV head's group, so
  // that the group's keys and values are read into one core's caches once
  // for all its heads. The last query tiles first: under a causal mask
  // they see the most keys, and the smaller tiles taken last leave the
  // threads less uneven.
  int64_t groups = s.batch * s.kvHeads;
  pool.parallelFor(static_cast<uint32_t>(groups * tiles), [&](uint32_t unit) {
    int64_t t = tiles - 1 - unit / groups;
    int64_t b = unit % groups / s.kvHeads, g = unit % s.kvHeads;
    QueryTile tile = queryTile(layout, s, t);
    for (int64_t h = g * layout.group(); h < (g + 1) * layout.group(); ++h)
      forwardTile(s, layout, q, k, v, out, stats, b, h, tile);
  });
}

void attentionBackward(ThreadPool &pool, const AttentionShape &s,
                       const void *dout, const void *q, const void *k,
                       const void *v, const void *out, const float *stats,
                       void *dq, void *dk, void *dv, const int32_t *positions) {
  checkAttentionShape(s);
  checkPositions(s, positions);
  Layout layout(s, positions);
  // One unit per (batch, KV head): its query heads in order, each adding
  // its part to the KV head's f32 sums, rounded once at the end.
  pool.parallelFor(
      static_cast<uint32_t>(s.batch * s.kvHeads), [&](uint32_t unit) {
        int64_t b = unit / s.kvHeads, g = unit % s.kvHeads;
        std::vector<float> dkSum(s.seqKv * s.headDim, 0.0f),
            dvSum(s.seqKv * s.valueDim, 0.0f);
        for (int64_t h = g * layout.group(); h < (g + 1) * layout.group(); ++h)
          backwardHead(s, layout, dout, q, k, v, out, stats, dq, b, h,
                       dkSum.data(), dvSum.data());
        writeRows(s.dtype, dkSum.data(), s.headDim, s.seqKv, s.headDim, dk,
                  layout.key(b, 0, g), layout.keyStride());
        writeRows(s.dtype, dvSum.data(), s.valueDim, s.seqKv, s.valueDim, dv,
                  layout.value(b, 0, g), layout.valueStride());
      });
}

} // namespace megrt
