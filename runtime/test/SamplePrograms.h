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

} // namespace megrt::test

#endif // MEGRT_TEST_SAMPLEPROGRAMS_H
