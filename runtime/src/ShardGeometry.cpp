// Which elements of a tensor a piece holds (ShardGeometry.h).
#include "ShardGeometry.h"

#include "Fail.h"

namespace megrt {

PieceGeometry PieceGeometry::whole(const Shape &shape) {
  PieceGeometry piece;
  piece.full = shape;
  piece.count = 1;
  for (int64_t extent : shape)
    piece.count *= extent;
  return piece;
}

int64_t PieceGeometry::blockElements() const {
  int64_t elements = 1;
  for (size_t d = 0; d < full.size(); ++d)
    elements *= static_cast<int>(d) == dim ? full[d] / blocks : full[d];
  return elements;
}

void PieceGeometry::check(const std::string &what) const {
  for (int64_t extent : full)
    if (extent < 0)
      fail(what, ": negative extent in shape ", formatShape(full));
  if (dim != -1) {
    if (dim < 0 || static_cast<size_t>(dim) >= full.size())
      fail(what, ": block dimension ", dim, " is outside the shape ",
           formatShape(full));
    if (blocks < 1 || full[dim] % blocks != 0 || block < 0 || block >= blocks)
      fail(what, ": block ", block, " of ", blocks, " along dimension ", dim,
           " does not divide the shape ", formatShape(full));
  } else if (blocks != 1 || block != 0) {
    fail(what, ": blocks without a block dimension");
  }
  if (first < 0 || count < 0 || first + count > blockElements())
    fail(what, ": elements [", first, ", ", first + count, ") are outside the ",
         blockElements(), " of its block");
}

bool PieceGeometry::operator==(const PieceGeometry &other) const {
  return full == other.full && dim == other.dim && blocks == other.blocks &&
         block == other.block && first == other.first && count == other.count;
}

std::vector<ElementRun> elementRuns(const PieceGeometry &piece) {
  std::vector<ElementRun> runs;
  if (piece.count == 0)
    return runs;
  if (piece.dim == -1) {
    runs.push_back({0, piece.first, piece.count});
    return runs;
  }
  // A block's rows along `dim` and below are consecutive in the whole
  // tensor: `row` elements at a time, `stride` apart.
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(piece.dim) + 1; d < piece.full.size();
       ++d)
    inner *= piece.full[d];
  int64_t extent = piece.full[piece.dim] / piece.blocks;
  int64_t row = extent * inner, stride = piece.full[piece.dim] * inner;
  int64_t at = piece.first, end = piece.first + piece.count;
  while (at < end) {
    int64_t outer = at / row, within = at % row;
    int64_t count = std::min(row - within, end - at);
    runs.push_back(
        {at - piece.first, outer * stride + piece.block * row + within, count});
    at += count;
  }
  return runs;
}

} // namespace megrt
