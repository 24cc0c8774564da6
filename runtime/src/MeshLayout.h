// Where each rank sits in a program's mesh, and the communicators of its
// submeshes.
#ifndef MEGRT_SRC_MESHLAYOUT_H
#define MEGRT_SRC_MESHLAYOUT_H

#include "comm/Communicator.h"
#include "megrt/Program.h"

#include <memory>
#include <vector>

namespace megrt {

/// Ranks are numbered row-major over the mesh axes (the last axis varies
/// fastest). A group of a submesh is the set of ranks that agree on every
/// axis outside the submesh; a rank's index in its group is row-major over
/// its coordinates on the submesh's axes, in the submesh's order. Without
/// a mesh there is one rank and no submesh.
class MeshLayout {
public:
  explicit MeshLayout(const Program &program);

  int numRanks() const { return numRanks_; }
  /// Which group of `submesh` holds `rank`: row-major over the rank's
  /// coordinates on the axes outside the submesh (the color of
  /// World::split).
  int groupOf(size_t submesh, int rank) const;
  /// The index of `rank` in its group of `submesh` (the key of
  /// World::split).
  int indexInGroup(size_t submesh, int rank) const;
  int groupSize(size_t submesh) const;
  /// Whether ranks `a` and `b` agree on every axis outside both submeshes
  /// (they hold pieces of one tensor split over the two groups).
  bool agreeOutside(int a, int b, size_t first, size_t second) const;

private:
  int coordinate(int rank, size_t axis) const;

  std::vector<int> axisSizes_;
  std::vector<SubmeshSpec> submeshes_;
  int numRanks_ = 1;
};

/// This rank's place in each submesh of a program.
struct SubmeshGroups {
  /// Per submesh, this rank's index in its group.
  std::vector<int> indices;
  /// Per submesh, this rank's group when a collective that communicates
  /// (not a slice) uses the submesh; null otherwise.
  std::vector<std::unique_ptr<comm::Group>> groups;
};

/// Creates the groups of SubmeshGroups with World::split, which is
/// collective over the world: every rank makes the same calls. Checks that
/// each group has the size and this rank the index the mesh gives.
SubmeshGroups connectGroups(const Program &program, comm::World &world,
                            comm::MemorySpace space);

} // namespace megrt

#endif // MEGRT_SRC_MESHLAYOUT_H
