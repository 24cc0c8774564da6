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

} // namespace megrt::test

#endif // MEGRT_TEST_SAMPLEPROGRAMS_H
