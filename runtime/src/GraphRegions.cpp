// The graph regions of an entry and the order in which a device runs them
// among the entry's other commands.
#include "GraphRegions.h"

#include "FbTypes.h"

namespace megrt {

std::vector<GraphRegion> graphRegionsOf(const fb::Entry &entry) {
  std::vector<GraphRegion> regions;
  for (uint32_t i = 0; i < sizeOf(entry.graphs()); ++i) {
    const fb::GraphRegion *graph = entry.graphs()->Get(i);
    regions.push_back({toString(graph->name()), graph->first_command(),
                       graph->num_commands()});
  }
  return regions;
}

} // namespace megrt
