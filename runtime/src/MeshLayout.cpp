// Where each rank sits in a program's mesh, and the communicators of its
// submeshes.
#include "MeshLayout.h"

#include "Fail.h"
#include "FbTypes.h"
#include "megrt/Collectives.h"

#include <algorithm>

namespace megrt {

MeshLayout::MeshLayout(const Program &program)
    : submeshes_(program.submeshes()) {
  if (!program.mesh())
    return;
  // Verification keeps the number of ranks within an int.
  for (const MeshAxis &axis : program.mesh()->axes)
    axisSizes_.push_back(static_cast<int>(axis.size));
  numRanks_ = static_cast<int>(program.mesh()->numRanks);
}

int MeshLayout::coordinate(int rank, size_t axis) const {
  int stride = 1;
  for (size_t a = axis + 1; a < axisSizes_.size(); ++a)
    stride *= axisSizes_[a];
  return rank / stride % axisSizes_[axis];
}

int MeshLayout::groupOf(size_t submesh, int rank) const {
  const std::vector<size_t> &inGroup = submeshes_[submesh].axisIndices;
  int color = 0;
  for (size_t a = 0; a < axisSizes_.size(); ++a)
    if (std::find(inGroup.begin(), inGroup.end(), a) == inGroup.end())
      color = color * axisSizes_[a] + coordinate(rank, a);
  return color;
}

int MeshLayout::indexInGroup(size_t submesh, int rank) const {
  int key = 0;
  for (size_t a : submeshes_[submesh].axisIndices)
    key = key * axisSizes_[a] + coordinate(rank, a);
  return key;
}

int MeshLayout::groupSize(size_t submesh) const {
  return static_cast<int>(submeshes_[submesh].size);
}

bool MeshLayout::agreeOutside(int a, int b, size_t first,
                              size_t second) const {
  auto inside = [&](size_t axis) {
    for (size_t s : {first, second}) {
      const std::vector<size_t> &axes = submeshes_[s].axisIndices;
      if (std::find(axes.begin(), axes.end(), axis) != axes.end())
        return true;
    }
    return false;
  };
  for (size_t axis = 0; axis < axisSizes_.size(); ++axis)
    if (!inside(axis) && coordinate(a, axis) != coordinate(b, axis))
      return false;
  return true;
}

SubmeshGroups connectGroups(const Program &program, comm::World &world,
                            comm::MemorySpace space) {
  const fb::Program &root = flatbufferOf(program);
  std::vector<bool> used(program.submeshes().size());
  for (uint32_t e = 0; e < sizeOf(root.entries()); ++e) {
    const fb::Entry &entry = *root.entries()->Get(e);
    for (uint32_t c = 0; c < sizeOf(entry.commands()); ++c)
      if (const fb::Collective *collective =
              entry.commands()->Get(c)->op_as_Collective())
        if (const CollectiveInfo *info =
                findCollective(toString(collective->kind()));
            info && info->communicates)
          used[collective->submesh()] = true;
  }
  MeshLayout layout(program);
  int rank = world.rank();
  SubmeshGroups result;
  result.groups.resize(used.size());
  for (size_t s = 0; s < used.size(); ++s) {
    int key = layout.indexInGroup(s, rank);
    result.indices.push_back(key);
    if (!used[s])
      continue;
    std::unique_ptr<comm::Group> &group = result.groups[s];
    group = world.split(layout.groupOf(s, rank), key, space);
    if (group->size() != layout.groupSize(s) || group->rank() != key)
      fail("the communicator of submesh ", s, " on rank ", rank, " has ",
           group->size(), " ranks and this rank at index ", group->rank(),
           ", but the mesh ", program.describeMesh(), " gives ",
           layout.groupSize(s), " ranks and index ", key);
  }
  return result;
}

} // namespace megrt
