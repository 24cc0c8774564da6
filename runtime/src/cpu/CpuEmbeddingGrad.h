// The embedding gradient on the CPU: a deterministic scatter-add.
#ifndef MEGRT_SRC_CPU_CPUEMBEDDINGGRAD_H
#define MEGRT_SRC_CPU_CPUEMBEDDINGGRAD_H

#include "EmbeddingGradCommand.h"

#include <cstdint>

namespace megrt {

class ThreadPool;

/// EmbeddingGrad's semantics (EmbeddingGradCommand.h): a stable counting
/// sort of the tokens by row into `scratch` (embeddingGradScratch(shape)
/// i32), then the rows on the pool's threads, each the f32 sum of its
/// tokens' gradient rows in token order, rounded once; the bits do not
/// depend on the number of threads. `firstRow` is null for a whole table.
void embeddingGrad(ThreadPool &pool, const EmbeddingGradShape &shape,
                   const void *grad, const void *ids, const int32_t *firstRow,
                   void *table, int32_t *scratch);

} // namespace megrt

#endif // MEGRT_SRC_CPU_CPUEMBEDDINGGRAD_H
