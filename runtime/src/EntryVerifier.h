// Semantic verification of one entry of an artifact: its inputs and
// outputs, memory plan, buffers, and every command (kernel launches, GEMMs,
// attention, embedding gradients, collectives and their waits, copies,
// graph regions).
#ifndef MEGRT_SRC_ENTRYVERIFIER_H
#define MEGRT_SRC_ENTRYVERIFIER_H

#include "MeshVerifier.h"
#include "megrt/megc_generated.h"

#include <string>

namespace megrt {

/// Throws megrt::Error naming `where` (the entry) and the command or
/// buffer at fault.
void verifyEntry(const fb::Program &program, const fb::Entry &entry,
                 const MeshVerifier &mesh, const std::string &where);

} // namespace megrt

#endif // MEGRT_SRC_ENTRYVERIFIER_H
