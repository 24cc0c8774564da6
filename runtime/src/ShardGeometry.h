//===- ShardGeometry.h - which elements of a tensor a piece holds --------===//
//
// A piece of a tensor as a distributed checkpoint records it and as a rank
// holds it: optionally one of `blocks` equal blocks along `dim`, and of that
// (or of the whole tensor) the flattened elements [first, first + count).
// Its elements, in the piece's order, are runs of consecutive elements of
// the whole tensor in increasing order, so the elements two pieces share
// are found by merging their runs: resharding is a read plan.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_SHARDGEOMETRY_H
#define MEGRT_SRC_SHARDGEOMETRY_H

#include "megrt/Shape.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megrt {

struct PieceGeometry {
  /// The whole tensor's shape.
  Shape full;
  /// The blocks along `dim` (-1: no blocks, the whole tensor).
  int dim = -1;
  int64_t blocks = 1, block = 0;
  /// Elements [first, first + count) of the flattened block (or tensor).
  int64_t first = 0, count = 0;

  /// The whole tensor of `shape`.
  static PieceGeometry whole(const Shape &shape);
  /// The elements of the block (or tensor) it selects.
  int64_t blockElements() const;
  /// Checks it against `full` (dim in range, the extent divisible by the
  /// blocks, the range inside the block); errors name `what`.
  void check(const std::string &what) const;
  bool operator==(const PieceGeometry &other) const;
};

/// Consecutive elements of a piece: piece elements [local, local + count)
/// are whole-tensor elements [global, global + count).
struct ElementRun {
  int64_t local, global, count;
};

/// The piece's elements as runs, in increasing global (and local) order.
std::vector<ElementRun> elementRuns(const PieceGeometry &piece);

/// Calls `shared(localA, localB, count)` for each run of elements pieces a
/// and b (of one tensor) both hold: a's elements [localA, localA + count)
/// are b's [localB, localB + count). Returns the number of shared elements.
template <typename Shared>
int64_t forEachSharedRun(const std::vector<ElementRun> &a,
                         const std::vector<ElementRun> &b, Shared shared) {
  int64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t begin = std::max(a[i].global, b[j].global);
    int64_t endA = a[i].global + a[i].count, endB = b[j].global + b[j].count;
    int64_t end = std::min(endA, endB);
    if (begin < end) {
      shared(a[i].local + (begin - a[i].global),
             b[j].local + (begin - b[j].global), end - begin);
      total += end - begin;
    }
    if (endA <= endB)
      ++i;
    else
      ++j;
  }
  return total;
}

} // namespace megrt

#endif // MEGRT_SRC_SHARDGEOMETRY_H
