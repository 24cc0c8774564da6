// Small valid programs that tests load as they are or break on purpose.
#ifndef MEGRT_TEST_SAMPLEPROGRAMS_H
#define MEGRT_TEST_SAMPLEPROGRAMS_H

#include "ArtifactBuilder.h"

namespace megrt::test {

/// Parameters "w" f32[4,3] (normal 0.02) and "b" f32[3] (zeros).
/// Entry "forward": x f32[2,4] -> y f32[2,3] = x * w + b, computed by a gemm
/// into the arena (at offset 64) and a copy out.
/// Entry "identity": x f32[2,4] -> y f32[2,4] by one copy.
ProgramDesc linearProgram();

/// Index of the gemm command in linearProgram()'s "forward" entry.
constexpr size_t kLinearGemmCommand = 0;

/// A program holding only the shared object at `kernelsPath`
/// (TestKernels.cpp) for the host, with its kernels "add" (add_constant, 2
/// args), "mul" (multiply, 3) and "exp" (exponential, 2).
ProgramDesc testKernelsProgram(const char *kernelsPath);

/// Two "layers" as graph regions between plain commands, on the test
/// kernels of the shared object at `kernelsPath` (TestKernels.cpp).
/// Parameters "w" f32[8] (ones) and "m" f32[4,2] (normal 0.5). Entry "step",
/// input x f32[8]:
///   0 copy x -> t         region "layers.0": 1 add(t) -> u, 2 mul(u, w) -> t
///   region "layers.1": 3 add(t) -> u, 4 mul(u, w) -> t, 5 add(w) -> w
///   6 copy t -> y, 7 exp(x) -> z, 8 gemm g = x[2,4] * m
/// so that y, z and g are outputs and every run changes w.
ProgramDesc layeredProgram(const char *kernelsPath);

/// Data parallelism on the mesh @world [dp_outer=outer, dp_shard=shard]
/// (shard divides 8), with submeshes 0 (dp_shard), 1 (dp_outer, dp_shard)
/// and 2 (dp_outer). Parameters: "w" f32[n], sharded over submesh 0 with
/// full shape [3,5] (n = ceil(15 / shard) + extraPadding), normal 0.5;
/// "full" f32[3,5] replicated, normal 0.5; "piece" f32[n], sharded like w,
/// a copy of "full" (a master weight of a replicated weight). Entry
/// "step", input x f32[2,4] split over submesh 1 (the caller passes
/// [2 * ranks, 4]), c = 8 / shard:
///   0 all_gather w over submesh 0, async -> gathered f32[shard * n]
///   1 all_reduce sum of x over submesh 1 -> sum f32[2,4]
///   2 all_reduce avg of x over submesh 2 -> outer_avg f32[2,4]
///   3 reduce_scatter sum of x (as f32[8]) over submesh 0 -> scattered f32[c]
///   4 slice of x (as f32[8]) over submesh 0 -> sliced f32[c]
///   5 copy x -> t (arena), 6 all_reduce sum of t in place over submesh 0,
///   7 copy t -> shard_sum f32[2,4], 8 wait for 0.
ProgramDesc dataParallelProgram(int64_t outer, int64_t shard,
                                int64_t extraPadding = 0);

} // namespace megrt::test

#endif // MEGRT_TEST_SAMPLEPROGRAMS_H
