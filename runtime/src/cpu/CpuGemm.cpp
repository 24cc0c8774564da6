// GEMM on the CPU through the BLAS, split into blocks that the device's
// threads run, with f32 scratch for 16-bit dtypes.
#include "cpu/CpuGemm.h"

#include "cpu/CpuBlas.h"
#include "cpu/ThreadPool.h"
#include "megrt/HalfFloat.h"

#include <algorithm>
#include <cmath>

namespace megrt {
namespace {

/// Work per block the split aims at (multiply-adds): a few hundred
/// microseconds of one core, so that packing the operands again per block
/// costs little.
constexpr int64_t kBlockWork = int64_t(1) << 25;
/// At most this many blocks per GEMM (a power of two, so that 1, 2, 4, 8
/// and 16 threads share them evenly).
constexpr int64_t kMaxBlocks = 16;
/// No block side below this (rows or columns of C): the BLAS kernels run
/// at speed from there.
constexpr int64_t kMinBlockSide = 64;

int64_t span(int64_t batch, int64_t stride, int64_t matrix) {
  return (batch - 1) * stride + matrix;
}

/// Elements [begin, end) of a 16-bit tensor as f32.
void widen(DType dtype, const void *source, float *out, size_t begin,
           size_t end) {
  const auto *bits = static_cast<const uint16_t *>(source);
  float (*convert)(uint16_t) = dtype == DType::BF16 ? bf16ToFloat : f16ToFloat;
  for (size_t i = begin; i < end; ++i)
    out[i] = convert(bits[i]);
}

/// Widens a whole operand on the pool, in fixed chunks.
void widenAll(ThreadPool &pool, DType dtype, const void *source,
              std::vector<float> &out) {
  constexpr size_t kChunk = size_t(1) << 16;
  size_t total = out.size();
  pool.parallelFor(static_cast<uint32_t>((total + kChunk - 1) / kChunk),
                   [&](uint32_t chunk) {
                     size_t begin = chunk * kChunk;
                     widen(dtype, source, out.data(), begin,
                           std::min(total, begin + kChunk));
                   });
}

float geluTanh(float x) {
  return 0.5f * x *
         (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

} // namespace

std::vector<GemmBlock> gemmBlocks(const GemmParams &p) {
  int64_t work = p.m * p.n * p.k;
  int64_t wanted = 1;
  while (wanted * 2 <= kMaxBlocks && wanted * 2 * kBlockWork <= work * p.batch)
    wanted *= 2;
  int64_t perBatch = std::max<int64_t>(1, wanted / p.batch);
  // Halve the longer side of the pieces of C until there are enough.
  int64_t rowPieces = 1, colPieces = 1;
  while (rowPieces * colPieces < perBatch) {
    bool canRows = p.m / (rowPieces * 2) >= kMinBlockSide;
    bool canCols = p.n / (colPieces * 2) >= kMinBlockSide;
    bool preferRows = p.m / rowPieces >= p.n / colPieces;
    if (canRows && (preferRows || !canCols))
      rowPieces *= 2;
    else if (canCols)
      colPieces *= 2;
    else
      break;
  }
  int64_t rowSize = (p.m + rowPieces - 1) / rowPieces;
  int64_t colSize = (p.n + colPieces - 1) / colPieces;
  std::vector<GemmBlock> blocks;
  for (int64_t batch = 0; batch < p.batch; ++batch)
    for (int64_t row = 0; row < p.m; row += rowSize)
      for (int64_t col = 0; col < p.n; col += colSize)
        blocks.push_back({batch, row, std::min(rowSize, p.m - row), col,
                          std::min(colSize, p.n - col)});
  return blocks;
}

void gemmF32(const GemmParams &p, const GemmBlock &block, const float *a,
             const float *b, float *c, const float *bias) {
  // Leading dimensions of the stored (not the transposed) matrices.
  int64_t lda = p.transA ? p.m : p.k;
  int64_t ldb = p.transB ? p.k : p.n;
  const float *aBlock =
      a + block.batch * p.strideA + (p.transA ? block.row : block.row * lda);
  const float *bBlock =
      b + block.batch * p.strideB + (p.transB ? block.col * ldb : block.col);
  float *cBlock = c + block.batch * p.strideC + block.row * p.n + block.col;
  sgemm(p.transA, p.transB, block.rows, block.cols, p.k, p.alpha, aBlock, lda,
        bBlock, ldb, p.beta, cBlock, p.n);
  for (int64_t row = 0; row < block.rows; ++row) {
    float *out = cBlock + row * p.n;
    if (bias)
      for (int64_t col = 0; col < block.cols; ++col)
        out[col] += bias[block.col + col];
    if (p.geluEpilogue)
      for (int64_t col = 0; col < block.cols; ++col)
        out[col] = geluTanh(out[col]);
  }
}

CpuGemm::CpuGemm(const GemmParams &params, const void *a, const void *b,
                 void *c, const void *bias)
    : params_(params), blocks_(gemmBlocks(params)), a_(a), b_(b), c_(c),
      bias_(bias) {
  checkCpuBlas(params.m, params.n, params.k);
  if (params.dtype == DType::F32)
    return;
  scratchA_.resize(span(params.batch, params.strideA, params.m * params.k));
  scratchB_.resize(span(params.batch, params.strideB, params.k * params.n));
  scratchC_.resize(span(params.batch, params.strideC, params.m * params.n));
  if (bias)
    scratchBias_.resize(params.n);
}

void CpuGemm::run(ThreadPool &pool) {
  const GemmParams &p = params_;
  uint32_t numBlocks = static_cast<uint32_t>(blocks_.size());
  if (p.dtype == DType::F32) {
    pool.parallelFor(numBlocks, [&](uint32_t i) {
      gemmF32(p, blocks_[i], static_cast<const float *>(a_),
              static_cast<const float *>(b_), static_cast<float *>(c_),
              static_cast<const float *>(bias_));
    });
    return;
  }
  widenAll(pool, p.dtype, a_, scratchA_);
  widenAll(pool, p.dtype, b_, scratchB_);
  // BLAS does not read C when beta is 0 (the reference BLAS contract), so its
  // old value need not be widened.
  if (p.beta != 0.0f)
    widenAll(pool, p.dtype, c_, scratchC_);
  if (bias_)
    widen(p.dtype, bias_, scratchBias_.data(), 0, scratchBias_.size());
  uint16_t (*narrow)(float) = p.dtype == DType::BF16 ? floatToBf16 : floatToF16;
  auto *out = static_cast<uint16_t *>(c_);
  pool.parallelFor(numBlocks, [&](uint32_t i) {
    const GemmBlock &block = blocks_[i];
    gemmF32(p, block, scratchA_.data(), scratchB_.data(), scratchC_.data(),
            bias_ ? scratchBias_.data() : nullptr);
    // Only the block of C is written; elements between batches
    // (stride_c > m*n) keep their value.
    for (int64_t row = block.row; row < block.row + block.rows; ++row)
      for (int64_t col = block.col; col < block.col + block.cols; ++col) {
        int64_t index = block.batch * p.strideC + row * p.n + col;
        out[index] = narrow(scratchC_[index]);
      }
  });
}

} // namespace megrt
