// What each rank of dataParallelProgram() computes, from the definitions of
// the collectives, for the single-process and the multi-rank tests.
#ifndef MEGRT_TEST_DATAPARALLELREFERENCE_H
#define MEGRT_TEST_DATAPARALLELREFERENCE_H

#include "megrt/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace megrt::test {

/// The global input x of dataParallelProgram(outer, shard): f32[2 * ranks,
/// 4] of quarters, so that every sum and average of two is exact in any
/// order.
Tensor dataParallelInput(int64_t outer, int64_t shard, uint32_t seed);

/// The full tensor that parameter `name` (normal 0.5, shape [3,5]) of
/// dataParallelProgram() initialises to on a single rank.
std::vector<float> fullInitialValues(const std::string &name, uint64_t seed);

/// Every output of entry "step" on `rank` (numbered row-major over
/// (dp_outer, dp_shard)) for the global input `x`, with parameter w
/// initialised from `seed`.
std::map<std::string, std::vector<float>>
dataParallelOutputs(int64_t outer, int64_t shard, int64_t extraPadding,
                    int rank, const Tensor &x, uint64_t seed);

} // namespace megrt::test

#endif // MEGRT_TEST_DATAPARALLELREFERENCE_H
