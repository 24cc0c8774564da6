//===- EntryFlops.cpp - the flops of an entry ---===//
//
// The floating-point work of an entry's GEMMs and attentions, for the
// program's listings and the step's model-flops utilisation.
//
//===----------------------------------------------------------------------===//

#include "ProgramBuilder.h"

namespace megc {

uint64_t EntryDesc::flops(bool onlyRecomputed) const {
  double total = 0;
  for (auto [index, command] : llvm::enumerate(commands)) {
    if (onlyRecomputed && !(index < recomputed.size() && recomputed[index]))
      continue;
    if (const auto *gemm = std::get_if<GemmCommand>(&command)) {
      total +=
          2.0 * static_cast<double>(gemm->m) * gemm->n * gemm->k * gemm->batch;
    } else if (const auto *attention =
                   std::get_if<AttentionCommand>(&command)) {
      double forward = 2.0 * static_cast<double>(attention->batch) *
                       attention->heads * attention->seqQ * attention->seqKv *
                       (attention->headDim + attention->valueDim);
      if (attention->causal)
        forward /= 2;
      total += attention->backward ? 2.5 * forward : forward;
    }
  }
  return static_cast<uint64_t>(total);
}

} // namespace megc
