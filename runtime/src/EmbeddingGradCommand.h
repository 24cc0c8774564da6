// The artifact's EmbeddingGrad command, shared by the verifier and the CPU
// and CUDA backends: its shape, its operands and its scratch's layout.
#ifndef MEGRT_SRC_EMBEDDINGGRADCOMMAND_H
#define MEGRT_SRC_EMBEDDINGGRADCOMMAND_H

#include "Fail.h"
#include "FbTypes.h"
#include "megrt/DType.h"
#include "megrt/EmbeddingGradScratch.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <optional>
#include <string>

namespace megrt {

/// table [vocab, dim] from grad [tokens, dim], both of `dtype`, and tokens
/// ids (i64 when wideIds, else i32).
struct EmbeddingGradShape {
  int64_t tokens, vocab, dim;
  DType dtype;
  bool wideIds;
};

/// "embedding_grad bf16 T=4096 V=32000 D=1024", for messages.
inline std::string describeEmbeddingGrad(const EmbeddingGradShape &s) {
  return concat("embedding_grad ", dtypeName(s.dtype), " T=", s.tokens,
                " V=", s.vocab, " D=", s.dim);
}

/// The command's scratch layout (megrt/EmbeddingGradScratch.h).
inline EmbeddingGradScratch embeddingGradScratch(const EmbeddingGradShape &s) {
  return embeddingGradScratch(s.tokens, s.vocab);
}

/// The buffers of an EmbeddingGrad command (firstRow -1: none).
struct EmbeddingGradOperands {
  uint32_t grad, ids, table, scratch;
  int32_t firstRow;
  EmbeddingGradShape shape;
};

/// Null when `command` is not an EmbeddingGrad. The ids' width comes from
/// their buffer in `entry`, which verification has checked.
inline std::optional<EmbeddingGradOperands>
embeddingGradOperands(const fb::Command &command, const fb::Entry &entry) {
  const fb::EmbeddingGrad *e = command.op_as_EmbeddingGrad();
  if (!e)
    return std::nullopt;
  bool wide = e->ids() < sizeOf(entry.buffers()) &&
              entry.buffers()->Get(e->ids())->dtype() == fb::DType::i64;
  return EmbeddingGradOperands{
      e->grad(),
      e->ids(),
      e->table(),
      e->scratch(),
      e->first_row(),
      {e->tokens(), e->vocab(), e->dim(), toDType(e->dtype()), wide}};
}

} // namespace megrt

#endif // MEGRT_SRC_EMBEDDINGGRADCOMMAND_H
