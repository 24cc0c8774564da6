// A session's parameters: the tensors, their device mirror, pieces of
// sharded parameters, copies and initialisation (ParameterStore.h).
#include "ParameterStore.h"

#include "Device.h"
#include "Fail.h"
#include "ParameterInit.h"
#include "comm/Communicator.h"

#include <algorithm>
#include <cstring>

namespace megrt {

Tensor pieceOf(const Tensor &full, int64_t first, const Shape &shape) {
  Tensor piece(full.dtype(), shape);
  if (piece.sizeBytes() == 0)
    return piece;
  size_t rowBytes = piece.sizeBytes() / static_cast<size_t>(shape[0]);
  size_t begin = static_cast<size_t>(first) * rowBytes;
  if (begin < full.sizeBytes())
    std::memcpy(piece.data(), full.data() + begin,
                std::min(piece.sizeBytes(), full.sizeBytes() - begin));
  return piece;
}

namespace {

/// Calls `copy(inBlock, inWhole, count)` for each contiguous run of block
/// `index` along `dim` of a tensor of shape `fullShape`, block shape
/// `blockShape`: element offsets into the block and the whole.
template <typename Copy>
void forEachBlockRun(const Shape &fullShape, const Shape &blockShape, int dim,
                     int64_t index, Copy copy) {
  int64_t elements = 1;
  for (int64_t extent : blockShape)
    elements *= extent;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < fullShape.size(); ++d)
    inner *= fullShape[d];
  int64_t run = blockShape[dim] * inner;
  for (int64_t first = 0; run > 0 && first < elements; first += run)
    copy(first,
         blockElementIndex(fullShape, dim, blockShape[dim], index, first), run);
}

} // namespace

ParameterStore::ParameterStore(const Program &program, const MeshLayout &layout,
                               int rank, comm::World *world)
    : program_(program), layout_(layout), rank_(rank), world_(world) {
  for (const ParameterSpec &spec : program.parameters())
    tensors_.emplace_back(spec.dtype, spec.shape);
}

const ParameterSpec &ParameterStore::spec(std::string_view name,
                                          size_t &index) const {
  std::optional<size_t> found = program_.findParameter(name);
  if (!found)
    fail("unknown parameter '", name, "'");
  index = *found;
  return program_.parameters()[index];
}

void ParameterStore::write(size_t index, const void *data) {
  std::memcpy(tensors_[index].data(), data, tensors_[index].sizeBytes());
  device_->parameterWritten(index);
}

const Tensor &ParameterStore::read(size_t index) const {
  device_->parameterRead(index);
  return tensors_[index];
}

void ParameterStore::written(size_t index) { device_->parameterWritten(index); }

void ParameterStore::initialize(uint64_t seed, bool weights, ThreadPool *pool) {
  const std::vector<ParameterSpec> &specs = program_.parameters();
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec &spec = specs[i];
    if (spec.initKind == InitKind::Copy || (!weights && !spec.state))
      continue;
    if (spec.sharding && spec.sharding->blockSubmesh) {
      uint32_t blocks = *spec.sharding->blockSubmesh;
      initializeParameterPieceOfBlock(
          tensors_[i], spec, seed, spec.sharding->fullShape,
          *spec.sharding->dim, layout_.groupSize(blocks),
          layout_.indexInGroup(blocks, rank_), pieceStart(spec), pool);
    } else if (spec.sharding && spec.sharding->dim)
      initializeParameterBlock(
          tensors_[i], spec, seed, spec.sharding->fullShape,
          *spec.sharding->dim,
          layout_.indexInGroup(spec.sharding->submesh, rank_), pool);
    else if (spec.sharding)
      initializeParameterPiece(tensors_[i], spec, seed, pieceStart(spec),
                               numElements(spec.sharding->fullShape, spec.name),
                               pool);
    else
      initializeParameter(tensors_[i], spec, seed, pool);
    written(i);
  }
  refreshCopies();
}

void ParameterStore::refreshCopies(std::optional<size_t> source) {
  const std::vector<ParameterSpec> &specs = program_.parameters();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].initKind != InitKind::Copy)
      continue;
    size_t from = *program_.findParameter(specs[i].initSource);
    if (source && from != *source)
      continue;
    // Verification allows a piece's copy of a source that holds what the
    // pieces split (the whole tensor, or this rank's block of it), or of a
    // source sharded the same way.
    bool sourceFlat = specs[from].sharding && specs[from].sharding->flat();
    if (specs[i].sharding && specs[i].sharding->flat() && !sourceFlat)
      copyParameterPiece(tensors_[i], read(from), pieceStart(specs[i]));
    else
      copyParameter(tensors_[i], read(from));
    written(i);
  }
}

/// Where this rank's piece of a flattened sharded parameter starts in the
/// flattened full tensor.
int64_t ParameterStore::pieceStart(const ParameterSpec &spec, int rank) const {
  return layout_.indexInGroup(spec.sharding->submesh, rank) * spec.shape[0];
}

PieceGeometry ParameterStore::geometry(size_t index, int rank) const {
  const ParameterSpec &spec = program_.parameters()[index];
  if (!spec.sharding)
    return PieceGeometry::whole(spec.shape);
  const ShardingSpec &sharding = *spec.sharding;
  PieceGeometry piece;
  piece.full = sharding.fullShape;
  if (sharding.dim) {
    uint32_t blocks = blockGroup(sharding);
    piece.dim = *sharding.dim;
    piece.blocks = layout_.groupSize(blocks);
    piece.block = layout_.indexInGroup(blocks, rank);
  }
  int64_t elements = piece.blockElements();
  if (!sharding.flat()) {
    piece.count = elements;
    return piece;
  }
  // A flattened piece: its range, without the padding past the end.
  piece.first = std::min(pieceStart(spec, rank), elements);
  piece.count = std::min(spec.shape[0], elements - piece.first);
  return piece;
}

bool ParameterStore::holdsFirstCopy(size_t index, int rank) const {
  PieceGeometry mine = geometry(index, rank);
  for (int peer = 0; peer < rank; ++peer)
    if (geometry(index, peer) == mine)
      return false;
  return true;
}

/// The group that cuts a sharded parameter into blocks.
uint32_t ParameterStore::blockGroup(const ShardingSpec &sharding) const {
  return sharding.blockSubmesh ? *sharding.blockSubmesh : sharding.submesh;
}

/// The shape of one block of a parameter sharded into blocks.
Shape ParameterStore::blockShape(const ShardingSpec &sharding) const {
  Shape shape = sharding.fullShape;
  shape[*sharding.dim] /= layout_.groupSize(blockGroup(sharding));
  return shape;
}

const Shape &ParameterStore::fileShape(const ParameterSpec &spec) {
  return spec.sharding ? spec.sharding->fullShape : spec.shape;
}

Tensor ParameterStore::localPiece(const ParameterSpec &spec,
                                  const Tensor &full) const {
  const ShardingSpec &sharding = *spec.sharding;
  if (!sharding.dim)
    return pieceOf(full, pieceStart(spec), spec.shape);
  Tensor block(full.dtype(), blockShape(sharding));
  size_t bytes = elementSize(full.dtype());
  forEachBlockRun(sharding.fullShape, block.shape(), *sharding.dim,
                  layout_.indexInGroup(blockGroup(sharding), rank_),
                  [&](int64_t inBlock, int64_t inWhole, int64_t count) {
                    std::memcpy(block.data() + inBlock * bytes,
                                full.data() + inWhole * bytes, count * bytes);
                  });
  if (sharding.blockSubmesh)
    return pieceOf(block, pieceStart(spec), spec.shape);
  return block;
}

Tensor ParameterStore::gather(size_t index) const {
  const ParameterSpec &spec = program_.parameters()[index];
  const Tensor &piece = read(index);
  size_t bytes = piece.sizeBytes();
  std::vector<uint8_t> pieces(bytes * static_cast<size_t>(world_->size()));
  world_->allGatherBytes(piece.data(), pieces.data(), bytes);
  Tensor full(spec.dtype, spec.sharding->fullShape);
  if (rank_ != 0)
    return full;
  uint32_t submesh = spec.sharding->submesh;
  int group = layout_.groupOf(submesh, rank_);
  size_t elementBytes = elementSize(spec.dtype);
  if (spec.sharding->blockSubmesh) {
    // Pieces of blocks: every peer that agrees with this rank outside the
    // two groups holds piece (its index over submesh) of block (its
    // index over the block group).
    const ShardingSpec &sharding = *spec.sharding;
    Shape block = blockShape(sharding);
    int64_t blockElements = 1;
    for (int64_t extent : block)
      blockElements *= extent;
    uint32_t blocks = *sharding.blockSubmesh;
    for (int peer = 0; peer < world_->size(); ++peer) {
      if (!layout_.agreeOutside(rank_, peer, submesh, blocks))
        continue;
      int64_t first = layout_.indexInGroup(submesh, peer) * spec.shape[0];
      int64_t index = layout_.indexInGroup(blocks, peer);
      const uint8_t *data = pieces.data() + static_cast<size_t>(peer) * bytes;
      for (int64_t i = 0; i < spec.shape[0] && first + i < blockElements; ++i)
        std::memcpy(full.data() + blockElementIndex(
                                      sharding.fullShape, *sharding.dim,
                                      block[*sharding.dim], index, first + i) *
                                      elementBytes,
                    data + i * elementBytes, elementBytes);
    }
    return full;
  }
  if (spec.sharding->dim) {
    for (int peer = 0; peer < world_->size(); ++peer) {
      if (layout_.groupOf(submesh, peer) != group)
        continue;
      const uint8_t *block = pieces.data() + static_cast<size_t>(peer) * bytes;
      forEachBlockRun(spec.sharding->fullShape, spec.shape, *spec.sharding->dim,
                      layout_.indexInGroup(submesh, peer),
                      [&](int64_t inBlock, int64_t inWhole, int64_t count) {
                        std::memcpy(full.data() + inWhole * elementBytes,
                                    block + inBlock * elementBytes,
                                    count * elementBytes);
                      });
    }
    return full;
  }
  auto total = static_cast<size_t>(full.numElements());
  for (int peer = 0; peer < world_->size(); ++peer) {
    if (layout_.groupOf(submesh, peer) != group)
      continue;
    // The padding past the full tensor's end is dropped.
    auto first = static_cast<size_t>(layout_.indexInGroup(submesh, peer) *
                                     spec.shape[0]);
    if (first >= total)
      continue;
    size_t count = std::min(static_cast<size_t>(spec.shape[0]), total - first);
    std::memcpy(full.data() + first * elementBytes,
                pieces.data() + static_cast<size_t>(peer) * bytes,
                count * elementBytes);
  }
  return full;
}

} // namespace megrt
