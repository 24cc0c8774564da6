// Semantic verification of a structurally valid artifact.
#ifndef MEGRT_SRC_PROGRAMVERIFIER_H
#define MEGRT_SRC_PROGRAMVERIFIER_H

#include "megrt/megc_generated.h"

namespace megrt {

/// Checks everything execution relies on: enum values, unique names, indices
/// in range, buffers inside their storage and consistent with dtype x shape,
/// GEMM dimensions consistent with their operands, kernel argument counts,
/// CUDA launch shapes and arguments within the kernel's arguments and
/// scratch, graph regions non-empty, in command order, disjoint and free of
/// collectives; the mesh, submeshes, sharded parameters and split inputs
/// consistent (MeshVerifier.h); collectives within their buffers and each
/// async one completed by exactly one later Wait.
/// Throws megrt::Error naming the entry, command or buffer at fault.
void verifyProgramSemantics(const fb::Program &program);

} // namespace megrt

#endif // MEGRT_SRC_PROGRAMVERIFIER_H
