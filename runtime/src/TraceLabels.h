// What the trace shows for each command, graph region and entry run, the
// same on every device.
#ifndef MEGRT_SRC_TRACELABELS_H
#define MEGRT_SRC_TRACELABELS_H

#include "GraphRegions.h"
#include "Trace.h"
#include "megrt/megc_generated.h"

namespace megrt {

/// Command `index` of an entry: a kernel launch (category "kernel", named
/// after the kernel), a Gemm ("gemm", args m n k batch dtype), a Copy
/// ("copy", args bytes), an attention ("attention"), a Collective
/// ("collective", named all_gather / reduce_scatter / all_reduce / slice, args
/// submesh axes ranks count dtype bytes async reduce) or a Wait
/// ("collective", named "wait", args collective); every one has its
/// command index in args. A new kind of command gets its category and
/// args here.
TraceLabel commandLabel(const fb::Program &program, const fb::Command &command,
                        uint32_t index);

/// One run of a graph region ("graph"): its first run captures (or records)
/// the graph, later ones replay it.
TraceLabel graphLabel(const GraphRegion &region, bool capture);

/// One run of an entry ("entry"), spanning its commands.
TraceLabel entryLabel(const fb::Entry &entry);

} // namespace megrt

#endif // MEGRT_SRC_TRACELABELS_H
