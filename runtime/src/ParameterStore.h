//===- ParameterStore.h - a session's parameters and their pieces --------===//
//
// The host tensors of a program's parameters and training state, which the
// device mirrors: every write and read goes through the store so that the
// device can follow. It knows how a rank's piece relates to the whole
// tensor (flattened pieces, tensor-parallel blocks, pieces of blocks), keeps
// copies (master weights) in step with their sources and initialises every
// parameter from its spec. Checkpoint files are CheckpointIO's job, running
// entries the Session's.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_PARAMETERSTORE_H
#define MEGRT_SRC_PARAMETERSTORE_H

#include "MeshLayout.h"
#include "ShardGeometry.h"
#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <optional>
#include <string_view>
#include <vector>

namespace megrt {

class Device;
class ThreadPool;
namespace comm {
class World;
}

/// Elements [first, first + shape[0]) of `full` along dim 0 (rows of the
/// global tensor of a split input; elements of the flattened tensor for a
/// sharded parameter), zero past its end.
Tensor pieceOf(const Tensor &full, int64_t first, const Shape &shape);

class ParameterStore {
public:
  /// Allocates every parameter (zero-filled); `world` is null for a program
  /// without a mesh.
  ParameterStore(const Program &program, const MeshLayout &layout, int rank,
                 comm::World *world);

  /// The tensors, which a device holds pointers into: only ever written in
  /// place.
  std::vector<Tensor> &tensors() { return tensors_; }
  /// The device that mirrors the tensors, once it exists.
  void attach(Device *device) { device_ = device; }

  /// The spec of the parameter `name` and its index; fails naming it when
  /// there is none.
  const ParameterSpec &spec(std::string_view name, size_t &index) const;

  /// Every write of a host parameter goes through here, so that the device
  /// can mirror it.
  void write(size_t index, const void *data);
  /// The current value (brought back from the device first).
  const Tensor &read(size_t index) const;
  /// The parameter was written in place (by an initialiser).
  void written(size_t index);

  /// Initialises every parameter from its spec (only the state when
  /// `weights` is false), on `pool`, then the copies.
  void initialize(uint64_t seed, bool weights, ThreadPool *pool);
  /// Re-derives the copies (master weights) of `source`, or of every
  /// parameter when it is not given, from the current weights.
  void refreshCopies(std::optional<size_t> source = std::nullopt);

  /// What files hold of a parameter: its full shape when it is sharded.
  static const Shape &fileShape(const ParameterSpec &spec);
  /// This rank's piece of `full`, a whole sharded parameter: its block
  /// along the sharding's dim, its range of the flattened tensor, or its
  /// range of its flattened block.
  Tensor localPiece(const ParameterSpec &spec, const Tensor &full) const;
  /// The full tensor of sharded parameter `index` from the pieces of every
  /// rank of its group, on rank 0 (the others get an unfilled tensor).
  /// Every rank must call it.
  Tensor gather(size_t index) const;

  /// Whether `rank`'s copy of parameter `index` is current: under a
  /// pipeline only the owning stage's ranks update it (the others hold no
  /// storage for it).
  bool holdsCurrent(size_t index, int rank) const;
  /// Whether this rank holds parameter `index` (its tensor is empty
  /// otherwise).
  bool holds(size_t index) const;
  /// Parameter `index` (a whole one) as its owning stage holds it, on
  /// rank 0 (the others get an unfilled tensor). Every rank must call it.
  Tensor fromOwner(size_t index) const;

  /// The elements of the whole tensor that `rank`'s parameter `index`
  /// holds (the padding past a flattened tensor's end left out).
  PieceGeometry geometry(size_t index, int rank) const;
  /// Whether `rank` holds the first copy of its piece of parameter `index`:
  /// no lower rank holds the same elements (what a distributed checkpoint
  /// has it write).
  bool holdsFirstCopy(size_t index, int rank) const;

  int rank() const { return rank_; }
  /// The world of a multi-rank program, null for one without a mesh.
  comm::World *world() const { return world_; }

private:
  int64_t pieceStart(const ParameterSpec &spec) const {
    return pieceStart(spec, rank_);
  }
  int64_t pieceStart(const ParameterSpec &spec, int rank) const;
  uint32_t blockGroup(const ShardingSpec &sharding) const;
  PieceGeometry geometryOf(const ParameterSpec &spec, int rank) const;

  const Program &program_;
  const MeshLayout &layout_;
  int rank_;
  comm::World *world_;
  std::vector<Tensor> tensors_;
  Device *device_ = nullptr;
};

} // namespace megrt

#endif // MEGRT_SRC_PARAMETERSTORE_H
