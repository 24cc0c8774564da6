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

ParameterStore::ParameterStore(const Program &program, const MeshLayout &layout,
                               int rank, comm::World *world)
    : program_(program), layout_(layout), rank_(rank), world_(world) {
  // A pipeline rank holds no storage for another stage's parameters.
  for (size_t i = 0; i < program.parameters().size(); ++i) {
    const ParameterSpec &spec = program.parameters()[i];
    tensors_.emplace_back(spec.dtype,
                          holdsCurrent(i, rank_) ? spec.shape : Shape{0});
  }
}

bool ParameterStore::holds(size_t index) const {
  return holdsCurrent(index, rank_);
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
    if (spec.initKind == InitKind::Copy || (!weights && !spec.state) ||
        !holds(i))
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
    if (specs[i].initKind != InitKind::Copy || !holds(i))
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
  return geometryOf(program_.parameters()[index], rank);
}

PieceGeometry ParameterStore::geometryOf(const ParameterSpec &spec,
                                         int rank) const {
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
  if (!holdsCurrent(index, rank))
    return false;
  PieceGeometry mine = geometry(index, rank);
  for (int peer = 0; peer < rank; ++peer)
    if (holdsCurrent(index, peer) && geometry(index, peer) == mine)
      return false;
  return true;
}

bool ParameterStore::holdsCurrent(size_t index, int rank) const {
  const ParameterSpec &spec = program_.parameters()[index];
  return spec.pipelineOwner < 0 ||
         layout_.indexInGroup(static_cast<size_t>(spec.pipelineSubmesh),
                              rank) == spec.pipelineOwner;
}

Tensor ParameterStore::fromOwner(size_t index) const {
  const ParameterSpec &spec = program_.parameters()[index];
  Tensor whole(spec.dtype, spec.shape);
  const Tensor &mine = read(index);
  if (holds(index))
    std::memcpy(whole.data(), mine.data(), mine.sizeBytes());
  if (spec.pipelineOwner < 0 || !world_)
    return whole;
  // The owning rank of rank 0's pipeline group.
  auto submesh = static_cast<size_t>(spec.pipelineSubmesh);
  int root = 0;
  while (!(layout_.groupOf(submesh, root) == layout_.groupOf(submesh, 0) &&
           layout_.indexInGroup(submesh, root) == spec.pipelineOwner))
    ++root;
  world_->broadcast(whole.data(), whole.sizeBytes(), root);
  return whole;
}

/// The group that cuts a sharded parameter into blocks.
uint32_t ParameterStore::blockGroup(const ShardingSpec &sharding) const {
  return sharding.blockSubmesh ? *sharding.blockSubmesh : sharding.submesh;
}

const Shape &ParameterStore::fileShape(const ParameterSpec &spec) {
  return spec.sharding ? spec.sharding->fullShape : spec.shape;
}

Tensor ParameterStore::localPiece(const ParameterSpec &spec,
                                  const Tensor &full) const {
  // Zero in the padding past a flattened tensor's end.
  Tensor piece(full.dtype(), spec.shape);
  size_t bytes = elementSize(full.dtype());
  for (const ElementRun &run : elementRuns(geometryOf(spec, rank_)))
    std::memcpy(piece.data() + run.local * bytes,
                full.data() + run.global * bytes, run.count * bytes);
  return piece;
}

Tensor ParameterStore::gather(size_t index) const {
  const ParameterSpec &spec = program_.parameters()[index];
  // Every rank gives a piece's bytes; one of another pipeline stage (which
  // holds none) gives zeros, left out below.
  const Tensor &held = read(index);
  size_t bytes = static_cast<size_t>(numElements(spec.shape, spec.name)) *
                 elementSize(spec.dtype);
  std::vector<uint8_t> piece(bytes, 0);
  std::memcpy(piece.data(), held.data(), held.sizeBytes());
  std::vector<uint8_t> pieces(bytes * static_cast<size_t>(world_->size()));
  world_->allGatherBytes(piece.data(), pieces.data(), bytes);
  Tensor full(spec.dtype, spec.sharding->fullShape);
  if (rank_ != 0)
    return full;
  // Each element from the first rank holding it (copies elsewhere, over
  // the groups that replicate the tensor, are the same).
  size_t elementBytes = elementSize(spec.dtype);
  std::vector<PieceGeometry> seen;
  for (int peer = 0; peer < world_->size(); ++peer) {
    if (!holdsCurrent(index, peer))
      continue;
    PieceGeometry geometry = geometryOf(spec, peer);
    if (std::find(seen.begin(), seen.end(), geometry) != seen.end())
      continue;
    const uint8_t *data = pieces.data() + static_cast<size_t>(peer) * bytes;
    for (const ElementRun &run : elementRuns(geometry))
      std::memcpy(full.data() + run.global * elementBytes,
                  data + run.local * elementBytes, run.count * elementBytes);
    seen.push_back(std::move(geometry));
  }
  return full;
}

} // namespace megrt
