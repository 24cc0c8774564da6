// The embedding_grad library kernel (megrt/LibraryKernels.def): its shape,
// its scratch's layout (private to the runtime's backends) and its CPU
// implementation, shared by the verifier, the CPU and the CUDA backend.
#ifndef MEGRT_SRC_LIBRARY_EMBEDDINGGRAD_H
#define MEGRT_SRC_LIBRARY_EMBEDDINGGRAD_H

#include "Fail.h"
#include "library/LibraryCall.h"
#include "megrt/DType.h"

#include <cstdint>
#include <limits>
#include <string>

namespace megrt {

class ThreadPool;

/// table [vocab, dim] from grad [tokens, dim], both of `dtype`, and tokens
/// ids (i64 when wideIds, else i32).
struct EmbeddingGradShape {
  int64_t tokens, vocab, dim;
  DType dtype;
  bool wideIds;
};

/// The shape of a verified call.
EmbeddingGradShape embeddingGradShape(const LibraryCallInfo &call);

/// "embedding_grad bf16 T=4096 V=32000 D=1024", for messages.
inline std::string describeEmbeddingGrad(const EmbeddingGradShape &s) {
  return concat("embedding_grad ", dtypeName(s.dtype), " T=", s.tokens,
                " V=", s.vocab, " D=", s.dim);
}

/// The scratch, in i32 elements from its start: row offsets (vocab + 1;
/// row r's tokens are order[offsets[r], offsets[r + 1])), each token's rank
/// among the earlier tokens of its row (tokens), and the tokens in row
/// order, ascending within a row (tokens).
struct EmbeddingGradScratch {
  int64_t offsets, ranks, order, elements;
};

constexpr EmbeddingGradScratch embeddingGradScratch(int64_t tokens,
                                                    int64_t vocab) {
  return {0, vocab + 1, vocab + 1 + tokens, vocab + 1 + 2 * tokens};
}
inline EmbeddingGradScratch embeddingGradScratch(const EmbeddingGradShape &s) {
  return embeddingGradScratch(s.tokens, s.vocab);
}

/// The sort's offsets and token numbers are i32: the scratch's element
/// count must stay at most this.
constexpr int64_t kMaxEmbeddingGradScratch =
    std::numeric_limits<int32_t>::max();

/// The CPU implementation: a stable counting sort of the tokens by row into
/// `scratch` (embeddingGradScratch(shape) i32), then the rows on the pool's
/// threads, each the f32 sum of its tokens' gradient rows in token order,
/// rounded once; the bits do not depend on the number of threads.
/// `firstRow` is null for a whole table.
void embeddingGrad(ThreadPool &pool, const EmbeddingGradShape &shape,
                   const void *grad, const void *ids, const int32_t *firstRow,
                   void *table, int32_t *scratch);

} // namespace megrt

#endif // MEGRT_SRC_LIBRARY_EMBEDDINGGRAD_H
