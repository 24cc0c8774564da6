// Checks shared by the verification of a program and of its entries
// (ProgramVerifier.cpp, EntryVerifier.cpp); each fails naming `what`.
#ifndef MEGRT_SRC_VERIFIERCHECKS_H
#define MEGRT_SRC_VERIFIERCHECKS_H

#include "MeshVerifier.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <set>
#include <string>

namespace megrt {

/// A name the compiler writes (parameters, entries, tensors, kernels and
/// their symbols) is printable ASCII: messages quote names, and a damaged
/// byte must not reach a terminal raw (found by the artifact damage
/// fuzzer).
void checkPrintableName(const std::string &name, const std::string &what);
/// Not empty, printable, and not in `seen` (which it joins).
void checkUniqueName(std::set<std::string> &seen, const std::string &name,
                     const std::string &what);
/// Byte size of dtype x shape, with the error naming `what`.
uint64_t checkedTensorBytes(fb::DType dtype,
                            const flatbuffers::Vector<int64_t> *shape,
                            const std::string &what);
/// An entry's inputs or outputs: unique names, valid dtypes and shapes,
/// splits over registered submeshes.
void verifyTensorSpecs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>> *specs,
    bool isInput, const MeshVerifier &mesh, const std::string &what);

} // namespace megrt

#endif // MEGRT_SRC_VERIFIERCHECKS_H
