// The graph regions of an entry and the order in which a device runs them
// among the entry's other commands.
#ifndef MEGRT_SRC_GRAPHREGIONS_H
#define MEGRT_SRC_GRAPHREGIONS_H

#include "megrt/megc_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megrt {

/// Commands [first, first + count) of an entry, run as one graph: captured
/// (or recorded) on the entry's first run and replayed afterwards.
struct GraphRegion {
  std::string name;
  uint32_t first;
  uint32_t count;
};

/// The entry's regions in command order; verification guarantees they are
/// non-empty, inside the entry and do not overlap.
std::vector<GraphRegion> graphRegionsOf(const fb::Entry &entry);

/// Runs an entry's commands in order: runRegion(r) for each region r (its
/// commands are the device's to run) and runCommand(i) for every command i
/// outside them. Without graphs every command goes through runCommand.
template <typename RunCommand, typename RunRegion>
void forEachStep(uint32_t numCommands, const std::vector<GraphRegion> &regions,
                 bool graphs, RunCommand &&runCommand, RunRegion &&runRegion) {
  uint32_t next = 0;
  if (graphs)
    for (size_t r = 0; r < regions.size(); ++r) {
      for (; next < regions[r].first; ++next)
        runCommand(next);
      runRegion(r);
      next = regions[r].first + regions[r].count;
    }
  for (; next < numCommands; ++next)
    runCommand(next);
}

} // namespace megrt

#endif // MEGRT_SRC_GRAPHREGIONS_H
