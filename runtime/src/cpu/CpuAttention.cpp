// Fused scaled-dot-product attention on the CPU, forward and backward.
#include "cpu/CpuAttention.h"

#include "megrt/HalfFloat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace megrt {
namespace {

/// Keys per tile: a tile's scores and its K and V rows in f32 stay in cache.
constexpr int64_t kKeyTile = 64;
/// Query rows that share one f32 copy of a K/V tile, which amortises the
/// widening of bf16/f16 keys and values.
constexpr int64_t kQueryTile = 32;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Reads elements [offset, offset + count) of a tensor as f32.
void widen(DType dtype, const void *tensor, int64_t offset, int64_t count,
           float *out) {
  if (dtype == DType::F32) {
    std::memcpy(out, static_cast<const float *>(tensor) + offset,
                count * sizeof(float));
    return;
  }
  const uint16_t *bits = static_cast<const uint16_t *>(tensor) + offset;
  float (*convert)(uint16_t) = dtype == DType::BF16 ? bf16ToFloat : f16ToFloat;
  for (int64_t i = 0; i < count; ++i)
    out[i] = convert(bits[i]);
}

/// Writes `count` f32 values to elements [offset, offset + count) of a
/// tensor, rounding to nearest even for bf16/f16.
void narrow(DType dtype, const float *values, int64_t count, void *tensor,
            int64_t offset) {
  if (dtype == DType::F32) {
    std::memcpy(static_cast<float *>(tensor) + offset, values,
                count * sizeof(float));
    return;
  }
  uint16_t *bits = static_cast<uint16_t *>(tensor) + offset;
  uint16_t (*convert)(float) = dtype == DType::BF16 ? floatToBf16 : floatToF16;
  for (int64_t i = 0; i < count; ++i)
    bits[i] = convert(values[i]);
}

/// Element offsets in the bshd layout, and the causal mask.
class Layout {
public:
  explicit Layout(const AttentionShape &s) : s_(s) {}

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
  /// Query heads per KV head.
  int64_t group() const { return s_.heads / s_.kvHeads; }
  /// How many keys (a prefix) query i sees: all, or with `causal` those up
  /// to i + seqKv - seqQ.
  int64_t visibleKeys(int64_t i) const {
    if (!s_.causal)
      return s_.seqKv;
    return std::clamp<int64_t>(i + s_.seqKv - s_.seqQ + 1, 0, s_.seqKv);
  }

private:
  const AttentionShape &s_;
};

/// Up to kKeyTile consecutive keys and values of one KV head in f32. Keys
/// are kept transposed too, so that a query's scores accumulate over the
/// tile's keys in the innermost loop (which vectorizes; a dot product over
/// the head dimension would be a strict-order reduction, which does not);
/// values likewise for the dp = dout v^T of the backward.
struct KeyTile {
  int64_t first = 0, count = 0;
  std::vector<float> keys, keysT, values, valuesT;

  explicit KeyTile(const AttentionShape &s)
      : keys(kKeyTile * s.headDim), keysT(s.headDim * kKeyTile),
        values(kKeyTile * s.valueDim), valuesT(s.valueDim * kKeyTile) {}

  void load(const AttentionShape &s, const Layout &layout, const void *k,
            const void *v, int64_t b, int64_t g, int64_t first, int64_t count,
            bool withValues) {
    this->first = first;
    this->count = count;
    for (int64_t j = 0; j < count; ++j) {
      float *row = &keys[j * s.headDim];
      widen(s.dtype, k, layout.key(b, first + j, g), s.headDim, row);
      for (int64_t d = 0; d < s.headDim; ++d)
        keysT[d * kKeyTile + j] = row[d];
    }
    if (!withValues)
      return;
    for (int64_t j = 0; j < count; ++j) {
      float *row = &values[j * s.valueDim];
      widen(s.dtype, v, layout.value(b, first + j, g), s.valueDim, row);
      for (int64_t n = 0; n < s.valueDim; ++n)
        valuesT[n * kKeyTile + j] = row[n];
    }
  }

  /// scores[j] = scale * query . key[j] for the first `limit` keys.
  void score(const AttentionShape &s, const float *query, int64_t limit,
             float *scores) const {
    std::fill(scores, scores + limit, 0.0f);
    for (int64_t d = 0; d < s.headDim; ++d) {
      float qd = query[d];
      const float *column = &keysT[d * kKeyTile];
      for (int64_t j = 0; j < limit; ++j)
        scores[j] += qd * column[j];
    }
    for (int64_t j = 0; j < limit; ++j)
      scores[j] *= s.scale;
  }
};

/// The running maximum and sum of one query row's softmax, updated a tile
/// of scores at a time.
struct OnlineSoftmax {
  float max = kNegInf;
  float sum = 0.0f;

  /// Turns the tile's scores (at least one) into exp(score - new maximum) and
  /// returns the factor exp(old maximum - new maximum) by which everything
  /// accumulated so far must be rescaled.
  float update(float *scores, int64_t count) {
    float newMax = max;
    for (int64_t j = 0; j < count; ++j)
      newMax = std::max(newMax, scores[j]);
    // The old maximum is -inf only before the first tile, whose
    // accumulations are all zero: the factor 0 is then harmless.
    float rescale = std::exp(max - newMax);
    float tileSum = 0.0f;
    for (int64_t j = 0; j < count; ++j) {
      scores[j] = std::exp(scores[j] - newMax);
      tileSum += scores[j];
    }
    sum = sum * rescale + tileSum;
    max = newMax;
    return rescale;
  }

  /// log(sum(exp(scores))); +inf for a row that saw no key, so that its
  /// recomputed probabilities exp(score - lse) are zero.
  float logSumExp() const {
    return sum > 0.0f ? max + std::log(sum)
                      : std::numeric_limits<float>::infinity();
  }
};

} // namespace

void attentionForward(const AttentionShape &s, const void *q, const void *k,
                      const void *v, void *out) {
  checkAttentionShape(s);
  Layout layout(s);
  KeyTile tile(s);
  std::vector<float> queries(kQueryTile * s.headDim);
  std::vector<float> acc(kQueryTile * s.valueDim);
  std::vector<OnlineSoftmax> softmax(kQueryTile);
  std::vector<float> scores(kKeyTile);

  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      int64_t g = h / layout.group();
      for (int64_t q0 = 0; q0 < s.seqQ; q0 += kQueryTile) {
        int64_t rows = std::min(kQueryTile, s.seqQ - q0);
        for (int64_t r = 0; r < rows; ++r)
          widen(s.dtype, q, layout.query(b, q0 + r, h), s.headDim,
                &queries[r * s.headDim]);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(softmax.begin(), softmax.end(), OnlineSoftmax());

        int64_t keyEnd = layout.visibleKeys(q0 + rows - 1);
        for (int64_t k0 = 0; k0 < keyEnd; k0 += kKeyTile) {
          tile.load(s, layout, k, v, b, g, k0, std::min(kKeyTile, keyEnd - k0),
                    /*withValues=*/true);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t limit =
                std::min(tile.count, layout.visibleKeys(q0 + r) - k0);
            if (limit <= 0)
              continue;
            tile.score(s, &queries[r * s.headDim], limit, scores.data());
            float rescale = softmax[r].update(scores.data(), limit);
            float *row = &acc[r * s.valueDim];
            for (int64_t n = 0; n < s.valueDim; ++n)
              row[n] *= rescale;
            for (int64_t j = 0; j < limit; ++j) {
              float p = scores[j];
              const float *value = &tile.values[j * s.valueDim];
              for (int64_t n = 0; n < s.valueDim; ++n)
                row[n] += p * value[n];
            }
          }
        }

        for (int64_t r = 0; r < rows; ++r) {
          float *row = &acc[r * s.valueDim];
          float sum = softmax[r].sum;
          float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
          for (int64_t n = 0; n < s.valueDim; ++n)
            row[n] *= inverse;
          narrow(s.dtype, row, s.valueDim, out, layout.output(b, q0 + r, h));
        }
      }
    }
  }
}

void attentionBackward(const AttentionShape &s, const void *dout, const void *q,
                       const void *k, const void *v, const void *out, void *dq,
                       void *dk, void *dv) {
  checkAttentionShape(s);
  Layout layout(s);
  KeyTile tile(s);
  std::vector<float> queries(kQueryTile * s.headDim);
  std::vector<float> gradOut(kQueryTile * s.valueDim);
  std::vector<float> outRow(s.valueDim);
  std::vector<float> dqAcc(kQueryTile * s.headDim);
  std::vector<float> lse(kQueryTile), delta(kQueryTile);
  std::vector<OnlineSoftmax> softmax(kQueryTile);
  std::vector<float> probs(kKeyTile), dp(kKeyTile);
  std::vector<float> dkAcc(s.seqKv * s.headDim), dvAcc(s.seqKv * s.valueDim);

  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.kvHeads; ++g) {
      std::fill(dkAcc.begin(), dkAcc.end(), 0.0f);
      std::fill(dvAcc.begin(), dvAcc.end(), 0.0f);
      for (int64_t h = g * layout.group(); h < (g + 1) * layout.group(); ++h) {
        for (int64_t q0 = 0; q0 < s.seqQ; q0 += kQueryTile) {
          int64_t rows = std::min(kQueryTile, s.seqQ - q0);
          for (int64_t r = 0; r < rows; ++r) {
            widen(s.dtype, q, layout.query(b, q0 + r, h), s.headDim,
                  &queries[r * s.headDim]);
            float *gradRow = &gradOut[r * s.valueDim];
            widen(s.dtype, dout, layout.output(b, q0 + r, h), s.valueDim,
                  gradRow);
            widen(s.dtype, out, layout.output(b, q0 + r, h), s.valueDim,
                  outRow.data());
            // delta = rowsum(dout * out) = rowsum(P * dP), the term that
            // the softmax's Jacobian subtracts.
            float sum = 0.0f;
            for (int64_t n = 0; n < s.valueDim; ++n)
              sum += gradRow[n] * outRow[n];
            delta[r] = sum;
          }

          // The forward's log-sum-exp of each row, recomputed.
          int64_t keyEnd = layout.visibleKeys(q0 + rows - 1);
          std::fill(softmax.begin(), softmax.end(), OnlineSoftmax());
          for (int64_t k0 = 0; k0 < keyEnd; k0 += kKeyTile) {
            tile.load(s, layout, k, v, b, g, k0,
                      std::min(kKeyTile, keyEnd - k0), /*withValues=*/false);
            for (int64_t r = 0; r < rows; ++r) {
              int64_t limit =
                  std::min(tile.count, layout.visibleKeys(q0 + r) - k0);
              if (limit <= 0)
                continue;
              tile.score(s, &queries[r * s.headDim], limit, probs.data());
              softmax[r].update(probs.data(), limit);
            }
          }
          for (int64_t r = 0; r < rows; ++r)
            lse[r] = softmax[r].logSumExp();

          std::fill(dqAcc.begin(), dqAcc.end(), 0.0f);
          for (int64_t k0 = 0; k0 < keyEnd; k0 += kKeyTile) {
            tile.load(s, layout, k, v, b, g, k0,
                      std::min(kKeyTile, keyEnd - k0), /*withValues=*/true);
            for (int64_t r = 0; r < rows; ++r) {
              int64_t limit =
                  std::min(tile.count, layout.visibleKeys(q0 + r) - k0);
              if (limit <= 0)
                continue;
              const float *query = &queries[r * s.headDim];
              const float *gradRow = &gradOut[r * s.valueDim];
              tile.score(s, query, limit, probs.data());
              for (int64_t j = 0; j < limit; ++j)
                probs[j] = std::exp(probs[j] - lse[r]);
              std::fill(dp.begin(), dp.begin() + limit, 0.0f);
              for (int64_t n = 0; n < s.valueDim; ++n) {
                float gn = gradRow[n];
                const float *column = &tile.valuesT[n * kKeyTile];
                for (int64_t j = 0; j < limit; ++j)
                  dp[j] += gn * column[j];
              }
              float *dqRow = &dqAcc[r * s.headDim];
              for (int64_t j = 0; j < limit; ++j) {
                // dS = P * (dP - delta); the scale of the scores carries
                // into dq and dk.
                float ds = probs[j] * (dp[j] - delta[r]) * s.scale;
                const float *key = &tile.keys[j * s.headDim];
                float *dkRow = &dkAcc[(k0 + j) * s.headDim];
                for (int64_t d = 0; d < s.headDim; ++d) {
                  dqRow[d] += ds * key[d];
                  dkRow[d] += ds * query[d];
                }
                float p = probs[j];
                float *dvRow = &dvAcc[(k0 + j) * s.valueDim];
                for (int64_t n = 0; n < s.valueDim; ++n)
                  dvRow[n] += p * gradRow[n];
              }
            }
          }
          for (int64_t r = 0; r < rows; ++r)
            narrow(s.dtype, &dqAcc[r * s.headDim], s.headDim, dq,
                   layout.query(b, q0 + r, h));
        }
      }
      for (int64_t j = 0; j < s.seqKv; ++j) {
        narrow(s.dtype, &dkAcc[j * s.headDim], s.headDim, dk,
               layout.key(b, j, g));
        narrow(s.dtype, &dvAcc[j * s.valueDim], s.valueDim, dv,
               layout.value(b, j, g));
      }
    }
  }
}

} // namespace megrt
