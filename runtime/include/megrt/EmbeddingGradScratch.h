// The scratch of the artifact's EmbeddingGrad command, which the compiler
// sizes and the runtime's backends lay out: one description for both.
#ifndef MEGRT_EMBEDDINGGRADSCRATCH_H
#define MEGRT_EMBEDDINGGRADSCRATCH_H

#include <cstdint>
#include <limits>

namespace megrt {

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

/// The sort's offsets and token numbers are i32: the scratch's element
/// count must stay at most this.
constexpr int64_t kMaxEmbeddingGradScratch =
    std::numeric_limits<int32_t>::max();

} // namespace megrt

#endif // MEGRT_EMBEDDINGGRADSCRATCH_H
