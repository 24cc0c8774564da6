// The flash-attention kernels as device functions over one block's tiles:
// forward, the backward's row statistics, the backward's dk/dv/dq, and the
// dq conversion. FlashAttention.cu instantiates them as kernels.
//
// Every block has kThreads threads. A tile of rows (queries, or keys in the
// backward) is split into groups of 4 rows; the threads of a row group own
// those 4 rows and split the columns among themselves: score columns c +
// groups * j (threads 1 apart read rows of K 1 apart, which the padded
// shared rows put in different banks), output columns in 4-wide chunks 4c +
// 4 * groups * m (threads 1 apart read consecutive 16 bytes). A row's
// reductions are warp shuffles among its group's lanes. Shared tiles are
// f32 whatever the element type, zero-filled beyond the tensors' edges, so
// that the inner loops need no bounds checks.
#ifndef MEGRT_SRC_CUDA_ATTENTION_FLASHATTENTIONKERNELS_CUH
#define MEGRT_SRC_CUDA_ATTENTION_FLASHATTENTIONKERNELS_CUH

#include "cuda/attention/FlashAttentionParams.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace megrt::attention {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kPosInf = __builtin_huge_valf();
/// The kernels' softmax runs in base 2; the statistics they exchange with
/// other backends are natural logarithms: ln(x) = log2(x) * ln(2).
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kLog2e = 1.442695040888963407f;
constexpr unsigned kFullWarp = 0xffffffffu;

/// Four floats moved by one 16-byte shared-memory access.
struct alignas(16) Float4 {
  float v[4];
};

/// Four elements moved by one global access when the address is aligned.
template <typename T> struct alignas(4 * sizeof(T)) Packed4 { T v[4]; };

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }

/// Rounds to nearest even, as the CPU backend does.
template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ int64_t minOf(int64_t a, int64_t b) {
  return a < b ? a : b;
}
__device__ __forceinline__ int64_t maxOf(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/// The position of `query` in the key sequence: its entry of p.positions
/// (non-decreasing i32, causal only; the padding rows past seqQ, which are
/// never stored, take the last query's) or query + seqKv - seqQ. A causal
/// query sees the keys up to its position.
__device__ __forceinline__ int64_t positionOf(const AttentionParams &p,
                                              int64_t query) {
  if (p.positions)
    return reinterpret_cast<const int32_t *>(p.positions)[minOf(query,
                                                                p.seqQ - 1)];
  return query + p.seqKv - p.seqQ;
}

/// The first query that sees `key` under the causal mask (seqQ when none
/// does): a binary search of the non-decreasing positions.
__device__ __forceinline__ int64_t firstQueryOf(const AttentionParams &p,
                                                int64_t key) {
  if (!p.positions)
    return maxOf(key - (p.seqKv - p.seqQ), 0);
  int64_t lo = 0, hi = p.seqQ;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (positionOf(p, mid) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

__device__ __forceinline__ Float4 loadShared4(const float *address) {
  return *reinterpret_cast<const Float4 *>(address);
}

/// Whether a tensor at `address` whose rows have `columns` elements can be
/// read in aligned 4-element pieces: every row starts at a multiple of
/// `columns` elements.
template <typename T>
__device__ __forceinline__ bool packedAccess(uint64_t address,
                                             int64_t columns) {
  return columns % 4 == 0 && address % (4 * sizeof(T)) == 0;
}

/// Reduces `x` over the kLanes consecutive lanes (a power of two) of a row
/// group. Every lane of the warp must call it.
template <int kLanes> __device__ __forceinline__ float groupMax(float x) {
#pragma unroll
  for (int lane = kLanes / 2; lane > 0; lane /= 2)
    x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, lane));
  return x;
}
template <int kLanes> __device__ __forceinline__ float groupSum(float x) {
#pragma unroll
  for (int lane = kLanes / 2; lane > 0; lane /= 2)
    x += __shfl_xor_sync(kFullWarp, x, lane);
  return x;
}

/// Copies rows [0, rows) x columns [0, columns) of a tensor slice (rows
/// `rowStride` elements apart) into the shared tile [kRows][paddedRow(
/// kColumns)] as f32, and zeros into the rest of the tile, so that tiles can
/// be read whole.
template <typename T, int kRows, int kColumns>
__device__ void loadTile(float *tile, const T *source, int64_t rowStride,
                         int64_t rows, int64_t columns, bool packed) {
  constexpr int kChunks = kColumns / 4;
  for (int e = threadIdx.x; e < kRows * kChunks; e += kThreads) {
    int r = e / kChunks, c = e % kChunks * 4;
    Float4 x = {{0.0f, 0.0f, 0.0f, 0.0f}};
    if (r < rows && c < columns) {
      const T *from = source + r * rowStride + c;
      if (packed) {
        Packed4<T> y = *reinterpret_cast<const Packed4<T> *>(from);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          x.v[i] = toFloat(y.v[i]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (c + i < columns)
            x.v[i] = toFloat(from[i]);
      }
    }
    *reinterpret_cast<Float4 *>(tile + r * paddedRow(kColumns) + c) = x;
  }
}

/// Writes the first `count` (1 to 4) of `values` to `to`.
template <typename T>
__device__ __forceinline__ void store4(T *to, const float *values,
                                       int64_t count, bool packed) {
  if (packed && count == 4) {
    Packed4<T> y;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      y.v[i] = fromFloat<T>(values[i]);
    *reinterpret_cast<Packed4<T> *>(to) = y;
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i < count)
      to[i] = fromFloat<T>(values[i]);
}

/// One block: 64 queries of head blockIdx.y of batch blockIdx.z, the
/// (gridDim.x - 1 - blockIdx.x)-th such tile. Walks the keys 64 at a time with
/// an online softmax (the running maximum and sum of each row, in base 2).
/// Forward: writes out, and with p.stats each row's log-sum-exp (natural
/// log). kStatistics (the backward's first kernel): skips the values and
/// writes each row's log2-sum-exp2 (from p.stats when given, without a pass
/// over the keys) and delta = rowsum(dout * out), and zeros the rows' dq
/// accumulator.
///
/// Shared memory (forwardSharedBytes): the Q tile, one tile that holds K and
/// then V, and the probabilities.
template <typename T, int kTier, bool kStatistics>
__device__ void attentionForwardBlock(const AttentionParams &p, float *shared) {
  constexpr int kRows = kForwardQueries, kKeys = kForwardKeys;
  constexpr int kColGroups = kThreads / (kRows / 4);
  constexpr int kKeysPerThread = kKeys / kColGroups;
  constexpr int kChunks = kTier / (4 * kColGroups);
  constexpr int kStride = paddedRow(kTier), kPStride = paddedRow(kKeys);
  static_assert(kColGroups <= 32 && kKeysPerThread * kColGroups == kKeys &&
                    kChunks * 4 * kColGroups == kTier,
                "tile sizes must split evenly among the threads");

  float *qTile = shared;
  float *kvTile = qTile + kRows * kStride;
  float *pTile = kvTile + kKeys * kStride;
  // Each row's last visible key, read in the key loop (from shared memory,
  // so that no register holds them across it).
  int *rowLast = reinterpret_cast<int *>(pTile + kRows * kPStride);

  const int rowGroup = threadIdx.x / kColGroups;
  const int col = threadIdx.x % kColGroups;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  // Blocks start in index order: under the causal mask the last query tiles
  // see the most keys, so they take the first indices and the short tiles
  // fill the tail.
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  const int64_t g = h / (p.heads / p.kvHeads);
  const int64_t rows = minOf(kRows, p.seqQ - q0);
  const int64_t qRowStride = p.heads * p.headDim;
  const int64_t kRowStride = p.kvHeads * p.headDim;
  const int64_t vRowStride = p.kvHeads * p.valueDim;
  const int64_t outRowStride = p.heads * p.valueDim;

  const T *q = reinterpret_cast<const T *>(p.q) +
               ((b * p.seqQ + q0) * p.heads + h) * p.headDim;
  const T *k = reinterpret_cast<const T *>(p.k) +
               (b * p.seqKv * p.kvHeads + g) * p.headDim;
  const T *v = reinterpret_cast<const T *>(p.v) +
               (b * p.seqKv * p.kvHeads + g) * p.valueDim;
  const bool packedK = packedAccess<T>(p.k, p.headDim);
  const bool packedV = packedAccess<T>(p.v, p.valueDim);
  loadTile<T, kRows, kTier>(qTile, q, qRowStride, rows, p.headDim,
                            packedAccess<T>(p.q, p.headDim));
  // Columns past the head dimension are zeros: dot products stop at the
  // next multiple of 4.
  const int dEnd = static_cast<int>((p.headDim + 3) / 4 * 4);

  // The tile's last query sees the most keys; later ones are never needed.
  // The backward given the forward's statistics visits none.
  const int64_t lastKey =
      p.causal ? minOf(maxOf(positionOf(p, q0 + rows - 1) + 1, 0), p.seqKv)
               : p.seqKv;
  const int64_t keyEnd = kStatistics && p.stats ? 0 : lastKey;
  // Written before the key loop's first barrier.
  for (int r = threadIdx.x; r < kRows; r += blockDim.x)
    rowLast[r] = static_cast<int>(
        p.causal ? minOf(positionOf(p, q0 + r), p.seqKv - 1) : p.seqKv - 1);

  float rowMax[4], rowSum[4], acc[4][4 * kChunks];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    rowMax[i] = kNegInf;
    rowSum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < 4 * kChunks; ++c)
      acc[i][c] = 0.0f;
  }

  for (int64_t k0 = 0; k0 < keyEnd; k0 += kKeys) {
    const int64_t keys = minOf(kKeys, p.seqKv - k0);
    // The previous tile's readers of kvTile and pTile are done.
    __syncthreads();
    loadTile<T, kKeys, kTier>(kvTile, k + k0 * kRowStride, kRowStride, keys,
                              p.headDim, packedK);
    __syncthreads();

    float s[4][kKeysPerThread];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j)
        s[i][j] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < dEnd; d += 4) {
      Float4 qv[4], kv[kKeysPerThread];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        qv[i] = loadShared4(qTile + (4 * rowGroup + i) * kStride + d);
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j)
        kv[j] = loadShared4(kvTile + (col + kColGroups * j) * kStride + d);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kKeysPerThread; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            s[i][j] += qv[i].v[e] * kv[j].v[e];
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // The row's last visible key, relative to this thread's first key
      // of the block.
      const int last = rowLast[4 * rowGroup + i] - static_cast<int>(k0 + col);
      float tileMax = kNegInf;
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) {
        bool visible = kColGroups * j <= last;
        s[i][j] = visible ? s[i][j] * p.scaleLog2e : kNegInf;
        tileMax = fmaxf(tileMax, s[i][j]);
      }
      tileMax = groupMax<kColGroups>(tileMax);
      const float newMax = fmaxf(rowMax[i], tileMax);
      // While a row has seen no visible key its maximum stays -inf; any
      // finite base then gives exp2(-inf) = 0 and no NaN from -inf - -inf.
      const float base = newMax == kNegInf ? 0.0f : newMax;
      const float rescale = exp2f(rowMax[i] - base);
      float tileSum = 0.0f;
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) {
        s[i][j] = exp2f(s[i][j] - base);
        tileSum += s[i][j];
      }
      tileSum = groupSum<kColGroups>(tileSum);
      rowSum[i] = rowSum[i] * rescale + tileSum;
      rowMax[i] = newMax;
#pragma unroll
      for (int c = 0; c < 4 * kChunks; ++c)
        acc[i][c] *= rescale;
    }
    if constexpr (!kStatistics) {
      // Every thread is done reading K before V replaces it.
      __syncthreads();
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kKeysPerThread; ++j)
          pTile[(4 * rowGroup + i) * kPStride + col + kColGroups * j] = s[i][j];
      loadTile<T, kKeys, kTier>(kvTile, v + k0 * vRowStride, vRowStride, keys,
                                p.valueDim, packedV);
      __syncthreads();

#pragma unroll 2
      for (int j = 0; j < kKeys; j += 4) {
        Float4 pv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          pv[i] = loadShared4(pTile + (4 * rowGroup + i) * kPStride + j);
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
          for (int m = 0; m < kChunks; ++m) {
            Float4 vv = loadShared4(kvTile + (j + e) * kStride + 4 * col +
                                    4 * kColGroups * m);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
              for (int c = 0; c < 4; ++c)
                acc[i][4 * m + c] += pv[i].v[e] * vv.v[c];
          }
      }
    }
  }

  if constexpr (!kStatistics) {
    // The statistics first, so that the maxima are dead before the stores
    // of the output; +inf for a query that sees no key, as the backward
    // expects.
    if (p.stats && col == 0) {
      float *stats =
          reinterpret_cast<float *>(p.stats) + (b * p.heads + h) * p.seqQ + q0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (4 * rowGroup + i < rows)
          stats[4 * rowGroup + i] =
              rowSum[i] > 0.0f ? (rowMax[i] + log2f(rowSum[i])) * kLn2
                               : kPosInf;
    }
    T *out = reinterpret_cast<T *>(p.out) +
             ((b * p.seqQ + q0) * p.heads + h) * p.valueDim;
    const bool packedOut = packedAccess<T>(p.out, p.valueDim);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * rowGroup + i;
      if (r >= rows)
        continue;
      // A query that sees no key (only when seqQ > seqKv) outputs zeros.
      const float inverse = rowSum[i] > 0.0f ? 1.0f / rowSum[i] : 0.0f;
#pragma unroll
      for (int m = 0; m < kChunks; ++m) {
        const int c0 = 4 * col + 4 * kColGroups * m;
        if (c0 >= p.valueDim)
          continue;
        float values[4];
#pragma unroll
        for (int c = 0; c < 4; ++c)
          values[c] = acc[i][4 * m + c] * inverse;
        store4(out + r * outRowStride + c0, values, minOf(4, p.valueDim - c0),
               packedOut);
      }
    }
  } else {
    const T *out = reinterpret_cast<const T *>(p.out) +
                   ((b * p.seqQ + q0) * p.heads + h) * p.valueDim;
    const T *dout = reinterpret_cast<const T *>(p.dout) +
                    ((b * p.seqQ + q0) * p.heads + h) * p.valueDim;
    float *lse = reinterpret_cast<float *>(p.lse) + (b * p.heads + h) * p.seqQ;
    float *delta =
        reinterpret_cast<float *>(p.delta) + (b * p.heads + h) * p.seqQ;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * rowGroup + i;
      float dot = 0.0f;
      if (r < rows)
        for (int64_t n = 4 * col; n < p.valueDim; n += 4 * kColGroups)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (n + c < p.valueDim)
              dot += toFloat(dout[r * outRowStride + n + c]) *
                     toFloat(out[r * outRowStride + n + c]);
      dot = groupSum<kColGroups>(dot);
      if (r < rows && col == 0) {
        // +inf for a query that sees no key: its probabilities
        // exp2(score - lse) are then zero.
        if (p.stats)
          lse[q0 + r] = reinterpret_cast<const float *>(
                            p.stats)[(b * p.heads + h) * p.seqQ + q0 + r] *
                        kLog2e;
        else
          lse[q0 + r] =
              rowSum[i] > 0.0f ? rowMax[i] + log2f(rowSum[i]) : kPosInf;
        delta[q0 + r] = dot;
      }
    }
    // The dk/dv kernel, next on the stream, adds into these rows.
    float *dqAccum = reinterpret_cast<float *>(p.dqAccum) +
                     ((b * p.seqQ + q0) * p.heads + h) * p.headDim;
    for (int64_t e = threadIdx.x; e < rows * p.headDim; e += kThreads)
      dqAccum[e / p.headDim * qRowStride + e % p.headDim] = 0.0f;
  }
}

/// One block: the keys from backwardKeys(kTier) * blockIdx.x of KV head
/// blockIdx.y of batch blockIdx.z. Holds their K and V tiles and their dk
/// and dv (in registers) while walking, for every query head that reads
/// this KV head, the query tiles that see any of the keys. Per query tile
/// it recomputes the probabilities P = exp2(scores - lse) and dS = P * (dP -
/// delta), then accumulates dv += P^T dO, dk += dS^T Q and adds dS K to the
/// f32 dq accumulator with atomics (the other key tiles add theirs).
///
/// Shared memory (backwardSharedBytes): K, V, Q and dO tiles, P and dS as
/// [key][query], and the query tile's lse and delta.
template <typename T, int kTier>
__device__ void attentionBackwardBlock(const AttentionParams &p,
                                       float *shared) {
  constexpr int kKeys = backwardKeys(kTier), kQueries = kBackwardQueries;
  // Scores, dk and dv: threads own 4 keys each.
  constexpr int kColGroups = kThreads / (kKeys / 4);
  constexpr int kQueriesPerThread = kQueries / kColGroups;
  constexpr int kChunks = kTier / (4 * kColGroups);
  // dq: threads own 4 queries each.
  constexpr int kDqColGroups = kThreads / (kQueries / 4);
  constexpr int kDqChunks = kTier / (4 * kDqColGroups);
  constexpr int kStride = paddedRow(kTier), kPStride = paddedRow(kQueries);
  static_assert(kColGroups <= 32 &&
                    kQueriesPerThread * kColGroups == kQueries &&
                    kChunks * 4 * kColGroups == kTier &&
                    kDqChunks * 4 * kDqColGroups == kTier,
                "tile sizes must split evenly among the threads");

  float *kTile = shared;
  float *vTile = kTile + kKeys * kStride;
  float *qTile = vTile + kKeys * kStride;
  float *doTile = qTile + kQueries * kStride;
  float *pTile = doTile + kQueries * kStride;
  float *dsTile = pTile + kKeys * kPStride;
  float *lseTile = dsTile + kKeys * kPStride;
  float *deltaTile = lseTile + kQueries;

  const int rowGroup = threadIdx.x / kColGroups;
  const int col = threadIdx.x % kColGroups;
  const int dqRowGroup = threadIdx.x / kDqColGroups;
  const int dqCol = threadIdx.x % kDqColGroups;
  const int64_t b = blockIdx.z, g = blockIdx.y;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kKeys;
  const int64_t keys = minOf(kKeys, p.seqKv - k0);
  const int64_t group = p.heads / p.kvHeads;
  const int64_t qRowStride = p.heads * p.headDim;
  const int64_t kRowStride = p.kvHeads * p.headDim;
  const int64_t vRowStride = p.kvHeads * p.valueDim;
  const int64_t outRowStride = p.heads * p.valueDim;

  const int64_t kOffset = ((b * p.seqKv + k0) * p.kvHeads + g) * p.headDim;
  const int64_t vOffset = ((b * p.seqKv + k0) * p.kvHeads + g) * p.valueDim;
  loadTile<T, kKeys, kTier>(kTile, reinterpret_cast<const T *>(p.k) + kOffset,
                            kRowStride, keys, p.headDim,
                            packedAccess<T>(p.k, p.headDim));
  loadTile<T, kKeys, kTier>(vTile, reinterpret_cast<const T *>(p.v) + vOffset,
                            vRowStride, keys, p.valueDim,
                            packedAccess<T>(p.v, p.valueDim));
  const bool packedQ = packedAccess<T>(p.q, p.headDim);
  const bool packedDout = packedAccess<T>(p.dout, p.valueDim);
  const int dEnd = static_cast<int>((p.headDim + 3) / 4 * 4);
  const int dvEnd = static_cast<int>((p.valueDim + 3) / 4 * 4);

  float dk[4][4 * kChunks], dv[4][4 * kChunks];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int c = 0; c < 4 * kChunks; ++c) {
      dk[i][c] = 0.0f;
      dv[i][c] = 0.0f;
    }

  // Under the causal mask key k0 is seen from its first query on: earlier
  // query tiles contribute nothing.
  const int64_t firstQuery = p.causal ? firstQueryOf(p, k0) : 0;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    const T *q = reinterpret_cast<const T *>(p.q) +
                 (b * p.seqQ * p.heads + h) * p.headDim;
    const T *dout = reinterpret_cast<const T *>(p.dout) +
                    (b * p.seqQ * p.heads + h) * p.valueDim;
    const float *lse =
        reinterpret_cast<const float *>(p.lse) + (b * p.heads + h) * p.seqQ;
    const float *delta =
        reinterpret_cast<const float *>(p.delta) + (b * p.heads + h) * p.seqQ;
    float *dqAccum = reinterpret_cast<float *>(p.dqAccum) +
                     (b * p.seqQ * p.heads + h) * p.headDim;

    for (int64_t q0 = firstQuery / kQueries * kQueries; q0 < p.seqQ;
         q0 += kQueries) {
      const int64_t rows = minOf(kQueries, p.seqQ - q0);
      // The previous query tile's readers of qTile, doTile, pTile, dsTile
      // and the statistics are done.
      __syncthreads();
      loadTile<T, kQueries, kTier>(qTile, q + q0 * qRowStride, qRowStride, rows,
                                   p.headDim, packedQ);
      loadTile<T, kQueries, kTier>(doTile, dout + q0 * outRowStride,
                                   outRowStride, rows, p.valueDim, packedDout);
      for (int e = threadIdx.x; e < kQueries; e += kThreads) {
        lseTile[e] = e < rows ? lse[q0 + e] : kPosInf;
        deltaTile[e] = e < rows ? delta[q0 + e] : 0.0f;
      }
      __syncthreads();

      // Scores and dP = dO V^T, as [key][query].
      float s[4][kQueriesPerThread], dp[4][kQueriesPerThread];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kQueriesPerThread; ++j) {
          s[i][j] = 0.0f;
          dp[i][j] = 0.0f;
        }
#pragma unroll 2
      for (int d = 0; d < dEnd; d += 4) {
        Float4 kv[4], qv[kQueriesPerThread];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          kv[i] = loadShared4(kTile + (4 * rowGroup + i) * kStride + d);
#pragma unroll
        for (int j = 0; j < kQueriesPerThread; ++j)
          qv[j] = loadShared4(qTile + (col + kColGroups * j) * kStride + d);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < kQueriesPerThread; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              s[i][j] += kv[i].v[e] * qv[j].v[e];
      }
#pragma unroll 2
      for (int d = 0; d < dvEnd; d += 4) {
        Float4 vv[4], ov[kQueriesPerThread];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          vv[i] = loadShared4(vTile + (4 * rowGroup + i) * kStride + d);
#pragma unroll
        for (int j = 0; j < kQueriesPerThread; ++j)
          ov[j] = loadShared4(doTile + (col + kColGroups * j) * kStride + d);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < kQueriesPerThread; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              dp[i][j] += vv[i].v[e] * ov[j].v[e];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kQueriesPerThread; ++j) {
          const int64_t key = k0 + 4 * rowGroup + i;
          const int qi = col + kColGroups * j;
          const int64_t query = q0 + qi;
          bool visible = key < p.seqKv && query < p.seqQ &&
                         (!p.causal || key <= positionOf(p, query));
          float prob =
              visible ? exp2f(s[i][j] * p.scaleLog2e - lseTile[qi]) : 0.0f;
          pTile[(4 * rowGroup + i) * kPStride + qi] = prob;
          dsTile[(4 * rowGroup + i) * kPStride + qi] =
              prob * (dp[i][j] - deltaTile[qi]);
        }
      __syncthreads();

      // dv += P^T dO and dk += dS^T Q over this tile's queries.
#pragma unroll 2
      for (int j = 0; j < kQueries; j += 4) {
        Float4 pv[4], sv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          pv[i] = loadShared4(pTile + (4 * rowGroup + i) * kPStride + j);
          sv[i] = loadShared4(dsTile + (4 * rowGroup + i) * kPStride + j);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
          for (int m = 0; m < kChunks; ++m) {
            const int c0 = 4 * col + 4 * kColGroups * m;
            Float4 ov = loadShared4(doTile + (j + e) * kStride + c0);
            Float4 qv = loadShared4(qTile + (j + e) * kStride + c0);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
              for (int c = 0; c < 4; ++c) {
                dv[i][4 * m + c] += pv[i].v[e] * ov.v[c];
                dk[i][4 * m + c] += sv[i].v[e] * qv.v[c];
              }
          }
      }

      // dq += dS K * scale for this tile's queries, one chunk of columns at
      // a time to keep few registers live beside dk and dv.
#pragma unroll
      for (int m = 0; m < kDqChunks; ++m) {
        const int c0 = 4 * dqCol + 4 * kDqColGroups * m;
        float dq[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            dq[i][c] = 0.0f;
#pragma unroll 4
        for (int key = 0; key < kKeys; ++key) {
          Float4 sv = loadShared4(dsTile + key * kPStride + 4 * dqRowGroup);
          Float4 kv = loadShared4(kTile + key * kStride + c0);
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c)
              dq[i][c] += sv.v[i] * kv.v[c];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = 4 * dqRowGroup + i;
          if (r >= rows)
            continue;
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (c0 + c < p.headDim)
              atomicAdd(dqAccum + (q0 + r) * qRowStride + c0 + c,
                        dq[i][c] * p.scale);
        }
      }
    }
  }

  // Every key tile writes its rows, zeros when no query sees them.
  T *dkOut = reinterpret_cast<T *>(p.dk) + kOffset;
  T *dvOut = reinterpret_cast<T *>(p.dv) + vOffset;
  const bool packedDk = packedAccess<T>(p.dk, p.headDim);
  const bool packedDv = packedAccess<T>(p.dv, p.valueDim);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * rowGroup + i;
    if (r >= keys)
      continue;
#pragma unroll
    for (int m = 0; m < kChunks; ++m) {
      const int c0 = 4 * col + 4 * kColGroups * m;
      float values[4];
      if (c0 < p.headDim) {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          values[c] = dk[i][4 * m + c] * p.scale;
        store4(dkOut + r * kRowStride + c0, values, minOf(4, p.headDim - c0),
               packedDk);
      }
      if (c0 < p.valueDim) {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          values[c] = dv[i][4 * m + c];
        store4(dvOut + r * vRowStride + c0, values, minOf(4, p.valueDim - c0),
               packedDv);
      }
    }
  }
}

/// dq = the f32 accumulator rounded to T, grid-strided over all elements.
template <typename T> __device__ void convertDq(const AttentionParams &p) {
  const int64_t count = p.batch * p.seqQ * p.heads * p.headDim;
  const float *from = reinterpret_cast<const float *>(p.dqAccum);
  T *to = reinterpret_cast<T *>(p.dq);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
       e < count; e += static_cast<int64_t>(gridDim.x) * kThreads)
    to[e] = fromFloat<T>(from[e]);
}

} // namespace megrt::attention

#endif // MEGRT_SRC_CUDA_ATTENTION_FLASHATTENTIONKERNELS_CUH
