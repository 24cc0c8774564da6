// The launch contract of the embedding-gradient kernels: their one argument
// and block sizes, shared by the kernels and the host.
#ifndef MEGRT_SRC_CUDA_EMBEDDING_EMBEDDINGGRADPARAMS_H
#define MEGRT_SRC_CUDA_EMBEDDING_EMBEDDINGGRADPARAMS_H

#include <cstdint>

namespace megrt::embedding {

/// Threads of the rank, place and sum kernels' blocks.
constexpr int kThreads = 256;
/// The scan runs as one block of kScanThreads threads, kScanItems
/// consecutive rows each per pass.
constexpr int kScanThreads = 1024;
constexpr int kScanItems = 8;
/// The row sums' vector accesses: 128 bits.
constexpr int kVectorBytes = 16;

/// Device addresses and sizes of one EmbeddingGrad command (the scratch's
/// parts as EmbeddingGradScratch lays them out).
struct EmbeddingGradParams {
  /// grad [tokens, dim] and table [vocab, dim] of the kernel's dtype; ids
  /// (tokens, i32 or i64 as the kernel's name says).
  uint64_t grad, ids, table;
  /// The i32 first row of a vocab-parallel block, or 0 (none).
  uint64_t firstRow;
  /// i32 parts of the scratch: offsets (vocab + 1), ranks and order
  /// (tokens each).
  uint64_t offsets, ranks, order;
  int64_t tokens, vocab, dim;
};

} // namespace megrt::embedding

#endif // MEGRT_SRC_CUDA_EMBEDDING_EMBEDDINGGRADPARAMS_H
