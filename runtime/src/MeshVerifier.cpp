// Semantic checks of what places work on ranks: the mesh, its submeshes,
// sharded parameters and split inputs.
#include "MeshVerifier.h"

#include "Fail.h"
#include "FbTypes.h"

#include <climits>
#include <set>

namespace megrt {
namespace {

std::string joinAxes(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *axes) {
  std::string text;
  for (uint32_t i = 0; i < sizeOf(axes); ++i)
    text += (i ? ", " : "") + toString(axes->Get(i));
  return text;
}

std::string joinAxes(const fb::Mesh &mesh) {
  std::string text;
  for (uint32_t i = 0; i < sizeOf(mesh.axes()); ++i)
    text += (i ? ", " : "") + toString(mesh.axes()->Get(i)->name());
  return text;
}

} // namespace

MeshVerifier::MeshVerifier(const fb::Program &program) : program_(program) {
  const fb::Mesh *mesh = program.mesh();
  uint32_t numSubmeshes = sizeOf(program.submeshes());
  if (!mesh) {
    if (numSubmeshes > 0)
      fail("the program has ", numSubmeshes,
           " submeshes but no mesh to take their axes from");
    return;
  }
  if (toString(mesh->name()).empty())
    fail("the mesh has an empty name");
  std::string where = "mesh @" + mesh->name()->str();
  if (sizeOf(mesh->axes()) == 0)
    fail(where, " has no axes");
  std::set<std::string> names;
  int64_t ranks = 1;
  for (uint32_t i = 0; i < mesh->axes()->size(); ++i) {
    const fb::MeshAxis &axis = *mesh->axes()->Get(i);
    std::string name = toString(axis.name());
    if (name.empty())
      fail(where, ": axis ", i, " has an empty name");
    if (!names.insert(name).second)
      fail(where, ": axis name '", name, "' is used twice");
    if (axis.size() < 1)
      fail(where, ": axis '", name, "' has size ", axis.size(),
           ", expected at least 1");
    if (__builtin_mul_overflow(ranks, axis.size(), &ranks) || ranks > INT_MAX)
      fail(where, ": more than ", INT_MAX, " ranks");
  }

  for (uint32_t i = 0; i < numSubmeshes; ++i) {
    const fb::Submesh &submesh = *program.submeshes()->Get(i);
    std::string at = concat("submesh ", i);
    if (sizeOf(submesh.axes()) == 0)
      fail(at, " has no axes");
    std::set<std::string> seen;
    int64_t size = 1;
    for (uint32_t j = 0; j < submesh.axes()->size(); ++j) {
      std::string name = toString(submesh.axes()->Get(j));
      if (!names.count(name))
        fail(at, ": '", name, "' is not an axis of ", where, " (axes ",
             joinAxes(*mesh), ")");
      if (!seen.insert(name).second)
        fail(at, ": axis '", name, "' is listed twice");
      for (uint32_t a = 0; a < mesh->axes()->size(); ++a)
        if (toString(mesh->axes()->Get(a)->name()) == name)
          size *= mesh->axes()->Get(a)->size();
    }
    groupSizes_.push_back(size);
  }
}

int64_t MeshVerifier::groupSize(uint64_t index,
                                const std::string &where) const {
  if (!program_.mesh())
    fail(where, ": refers to submesh ", index,
         ", but the program has no mesh (a multi-rank program needs one)");
  if (index >= groupSizes_.size())
    fail(where, ": submesh index ", index, " is out of range (submesh count ",
         groupSizes_.size(), ")");
  return groupSizes_[index];
}

std::string MeshVerifier::describeSubmesh(uint32_t index) const {
  return concat("submesh ", index, " (",
                joinAxes(program_.submeshes()->Get(index)->axes()), ": ",
                groupSizes_[index], " ranks)");
}

void MeshVerifier::verifySharding(const fb::Parameter &param,
                                  const std::string &where) const {
  const fb::Sharding *sharding = param.sharding();
  if (!sharding)
    return;
  std::string at = where + ": sharding";
  int64_t group = groupSize(sharding->submesh(), at);
  Shape shape = toShape(param.shape());
  if (sharding->dim() < -1)
    fail(at, ": invalid dim ", sharding->dim(), " (-1 means flattened)");
  if (sharding->block_submesh() < -1)
    fail(at, ": invalid block_submesh ", sharding->block_submesh(),
         " (-1 means none)");
  if (sharding->block_submesh() >= 0 && sharding->dim() < 0)
    fail(at, ": block_submesh needs the dim its blocks split");
  // Pieces of this rank's block: the block is what the pieces must hold.
  Shape pieceOf = toShape(sharding->full_shape());
  if (sharding->block_submesh() >= 0) {
    auto blocksAt = static_cast<uint64_t>(sharding->block_submesh());
    int64_t blocks = groupSize(blocksAt, at + " block_submesh");
    auto dim = static_cast<size_t>(sharding->dim());
    if (dim >= pieceOf.size())
      fail(at, ": dim ", dim, " is out of range for full shape ",
           formatShape(pieceOf));
    numElements(pieceOf, at + " full_shape");
    if (pieceOf[dim] % blocks != 0)
      fail(at, ": dim ", dim, " of full shape ", formatShape(pieceOf),
           " does not split into the ", describeSubmesh(blocksAt));
    pieceOf[dim] /= blocks;
  } else if (sharding->dim() >= 0) {
    Shape fullShape = toShape(sharding->full_shape());
    auto dim = static_cast<size_t>(sharding->dim());
    if (dim >= fullShape.size())
      fail(at, ": dim ", dim, " is out of range for full shape ",
           formatShape(fullShape));
    numElements(fullShape, at + " full_shape");
    Shape block = fullShape;
    if (block[dim] % group != 0)
      fail(at, ": dim ", dim, " of full shape ", formatShape(fullShape),
           " does not split into the ", describeSubmesh(sharding->submesh()));
    block[dim] /= group;
    if (shape != block)
      fail(at, ": a block along dim ", dim, " of full shape ",
           formatShape(fullShape), " on the ",
           describeSubmesh(sharding->submesh()), " has shape ",
           formatShape(block), ", found ", formatShape(shape));
    return;
  }
  if (shape.size() != 1)
    fail(at,
         ": a sharded parameter holds a piece of the flattened tensor "
         "and must be 1-D, found shape ",
         formatShape(shape));
  int64_t full = numElements(pieceOf, at + " full_shape");
  int64_t held;
  if (__builtin_mul_overflow(shape[0], group, &held) || held < full)
    fail(at, ": pieces of ", shape[0], " elements on the ",
         describeSubmesh(sharding->submesh()), " cannot hold ",
         sharding->block_submesh() >= 0 ? "a block of shape " : "full shape ",
         formatShape(pieceOf), " (", full, " elements)");
}

void MeshVerifier::verifySplit(const fb::TensorSpec &spec, bool isInput,
                               const std::string &where) const {
  if (spec.split() < -1)
    fail(where, ": invalid split ", spec.split(), " (-1 means not split)");
  if (spec.split() == -1)
    return;
  if (!isInput)
    fail(where, ": split applies to entry inputs only");
  int64_t group =
      groupSize(static_cast<uint64_t>(spec.split()), where + ": split");
  Shape shape = toShape(spec.shape());
  if (shape.empty())
    fail(where, ": a split input needs a dim 0, found a scalar");
  int64_t global;
  if (__builtin_mul_overflow(shape[0], group, &global))
    fail(where, ": the global dim 0 (", shape[0], " x ", group,
         " ranks) overflows");
}

} // namespace megrt
