// The embedding gradient as a deterministic scatter-add: a stable counting
// sort of the tokens by the table row their id names, then one block per
// row summing its tokens' gradient rows in token order. nvcc compiles this
// file into the fatbin the runtime embeds; CudaEmbeddingGrad launches its
// kernels, after zeroing the offsets, in the order below:
//   rank:  each token's rank among the earlier tokens of its row, and each
//          row's token count (in offsets[row + 1]);
//   scan:  the counts summed into the rows' offsets (one block);
//   place: each token into order[offsets[row] + rank];
//   sum:   table[row] = the sum of grad[order[i]] over the row's tokens,
//          in f32 and in token order, rounded once (on 16-byte vectors
//          where the rows and addresses allow).
// Every sum is taken in the same order whatever the grid, so the result is
// the CPU backend's, bit for bit.
#include "cuda/embedding/EmbeddingGradParams.h"

#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace megrt::embedding {
namespace {

__device__ int64_t firstRowOf(const EmbeddingGradParams &p) {
  return p.firstRow ? *reinterpret_cast<const int32_t *>(p.firstRow) : 0;
}

/// The table row token t's id names, or -1 for an id outside the table.
template <typename Id>
__device__ int rowOf(const EmbeddingGradParams &p, int64_t t, int64_t first) {
  int64_t row =
      static_cast<int64_t>(reinterpret_cast<const Id *>(p.ids)[t]) - first;
  return row >= 0 && row < p.vocab ? static_cast<int>(row) : -1;
}

/// One thread per token, one block per kThreads tokens: walks the tokens
/// before its block's end a tile at a time through shared memory, counting
/// those of its own row. The counts become offsets in the scan.
template <typename Id> __device__ void rankTokens(const EmbeddingGradParams &p) {
  __shared__ int rows[kThreads];
  int64_t first = firstRowOf(p);
  int64_t blockStart = static_cast<int64_t>(blockIdx.x) * kThreads;
  int64_t t = blockStart + threadIdx.x;
  int row = t < p.tokens ? rowOf<Id>(p, t, first) : -1;
  int rank = 0;
  for (int64_t tile = 0; tile <= blockStart; tile += kThreads) {
    int64_t u = tile + threadIdx.x;
    // -2 matches no token, not even one outside the table (-1).
    rows[threadIdx.x] = u < p.tokens ? rowOf<Id>(p, u, first) : -2;
    __syncthreads();
    int earlier = tile == blockStart ? static_cast<int>(threadIdx.x) : kThreads;
    for (int j = 0; j < earlier; ++j)
      rank += rows[j] == row;
    __syncthreads();
  }
  if (row >= 0) {
    reinterpret_cast<int32_t *>(p.ranks)[t] = rank;
    atomicAdd(reinterpret_cast<int32_t *>(p.offsets) + row + 1, 1);
  }
}

/// One block: offsets[1..vocab] summed in place (inclusive), so that
/// offsets[r] is the number of tokens of the rows before r (offsets[0] is
/// 0 from the zeroing).
__device__ void scanOffsets(const EmbeddingGradParams &p) {
  using Scan = cub::BlockScan<int32_t, kScanThreads>;
  __shared__ typename Scan::TempStorage storage;
  int32_t *counts = reinterpret_cast<int32_t *>(p.offsets) + 1;
  int32_t carried = 0;
  for (int64_t base = 0; base < p.vocab;
       base += static_cast<int64_t>(kScanThreads) * kScanItems) {
    int64_t at = base + static_cast<int64_t>(threadIdx.x) * kScanItems;
    int32_t items[kScanItems];
    for (int i = 0; i < kScanItems; ++i)
      items[i] = at + i < p.vocab ? counts[at + i] : 0;
    int32_t total;
    Scan(storage).InclusiveSum(items, items, total);
    for (int i = 0; i < kScanItems; ++i)
      if (at + i < p.vocab)
        counts[at + i] = items[i] + carried;
    carried += total;
    // The next pass reuses the scan's shared memory.
    __syncthreads();
  }
}

/// One thread per token.
template <typename Id> __device__ void placeTokens(const EmbeddingGradParams &p) {
  int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (t >= p.tokens)
    return;
  int row = rowOf<Id>(p, t, firstRowOf(p));
  if (row < 0)
    return;
  const int32_t *offsets = reinterpret_cast<const int32_t *>(p.offsets);
  int32_t rank = reinterpret_cast<const int32_t *>(p.ranks)[t];
  reinterpret_cast<int32_t *>(p.order)[offsets[row] + rank] =
      static_cast<int32_t>(t);
}

__device__ float widen(float value) { return value; }
__device__ float widen(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ float widen(__half value) { return __half2float(value); }

template <typename T> __device__ T narrow(float value);
template <> __device__ float narrow<float>(float value) { return value; }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}
template <> __device__ __half narrow<__half>(float value) {
  return __float2half_rn(value);
}

/// One block per table row; its threads stride over the row's columns, each
/// summing its column over the row's tokens in order (a row no token names
/// is written as zeros).
template <typename T> __device__ void sumRows(const EmbeddingGradParams &p) {
  int64_t row = blockIdx.x;
  const int32_t *offsets = reinterpret_cast<const int32_t *>(p.offsets);
  const int32_t *order = reinterpret_cast<const int32_t *>(p.order);
  const T *grad = reinterpret_cast<const T *>(p.grad);
  T *table = reinterpret_cast<T *>(p.table) + row * p.dim;
  int32_t begin = offsets[row], end = offsets[row + 1];
  for (int64_t d = threadIdx.x; d < p.dim; d += kThreads) {
    float sum = 0.0f;
    for (int32_t i = begin; i < end; ++i)
      sum = __fadd_rn(sum, widen(grad[static_cast<int64_t>(order[i]) * p.dim + d]));
    table[d] = narrow<T>(sum);
  }
}

/// sumRows on 16-byte vectors: the host launches it when the rows split
/// into whole vectors and grad and table are 16-byte aligned. Each thread
/// sums the elements of its vector in the same order as sumRows, so the
/// bits are the same.
template <typename T>
__device__ void sumRowVectors(const EmbeddingGradParams &p) {
  constexpr int kLanes = kVectorBytes / sizeof(T);
  int64_t row = blockIdx.x;
  const int32_t *offsets = reinterpret_cast<const int32_t *>(p.offsets);
  const int32_t *order = reinterpret_cast<const int32_t *>(p.order);
  const T *grad = reinterpret_cast<const T *>(p.grad);
  uint4 *table = reinterpret_cast<uint4 *>(reinterpret_cast<T *>(p.table) +
                                           row * p.dim);
  int32_t begin = offsets[row], end = offsets[row + 1];
  int64_t vectors = p.dim / kLanes;
  for (int64_t v = threadIdx.x; v < vectors; v += kThreads) {
    float sum[kLanes];
    for (int lane = 0; lane < kLanes; ++lane)
      sum[lane] = 0.0f;
    for (int32_t i = begin; i < end; ++i) {
      uint4 bits = reinterpret_cast<const uint4 *>(
          grad + static_cast<int64_t>(order[i]) * p.dim)[v];
      const T *values = reinterpret_cast<const T *>(&bits);
      for (int lane = 0; lane < kLanes; ++lane)
        sum[lane] = __fadd_rn(sum[lane], widen(values[lane]));
    }
    uint4 out;
    T *values = reinterpret_cast<T *>(&out);
    for (int lane = 0; lane < kLanes; ++lane)
      values[lane] = narrow<T>(sum[lane]);
    table[v] = out;
  }
}

} // namespace
} // namespace megrt::embedding

using megrt::embedding::EmbeddingGradParams;
using megrt::embedding::kScanThreads;
using megrt::embedding::kThreads;

#define MEGRT_EMBEDDING_IDS(Id, NAME)                                          \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      megrt_embedding_grad_rank_##NAME(EmbeddingGradParams p) {                \
    megrt::embedding::rankTokens<Id>(p);                                       \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      megrt_embedding_grad_place_##NAME(EmbeddingGradParams p) {               \
    megrt::embedding::placeTokens<Id>(p);                                      \
  }

#define MEGRT_EMBEDDING_DTYPE(T, NAME)                                         \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      megrt_embedding_grad_sum_##NAME(EmbeddingGradParams p) {                 \
    megrt::embedding::sumRows<T>(p);                                           \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      megrt_embedding_grad_sum_vectors_##NAME(EmbeddingGradParams p) {         \
    megrt::embedding::sumRowVectors<T>(p);                                     \
  }

MEGRT_EMBEDDING_IDS(int32_t, i32)
MEGRT_EMBEDDING_IDS(int64_t, i64)
MEGRT_EMBEDDING_DTYPE(float, f32)
MEGRT_EMBEDDING_DTYPE(__nv_bfloat16, bf16)
MEGRT_EMBEDDING_DTYPE(__half, f16)

extern "C" __global__ void __launch_bounds__(kScanThreads)
    megrt_embedding_grad_scan(EmbeddingGradParams p) {
  megrt::embedding::scanOffsets(p);
}
