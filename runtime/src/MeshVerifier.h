// Semantic checks of what places work on ranks: the mesh, its submeshes,
// sharded parameters and split inputs.
#ifndef MEGRT_SRC_MESHVERIFIER_H
#define MEGRT_SRC_MESHVERIFIER_H

#include "megrt/megc_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megrt {

class MeshVerifier {
public:
  /// Checks the mesh (a name, axes with unique names and positive sizes,
  /// at most INT_MAX ranks) and the submeshes (each one or more distinct
  /// axes of the mesh). Throws megrt::Error naming what is wrong.
  explicit MeshVerifier(const fb::Program &program);

  /// The ranks in a group of submesh `index`, which `where` refers to;
  /// fails if the program has no mesh or the index is out of range.
  int64_t groupSize(uint64_t index, const std::string &where) const;
  /// "submesh 1 (dp_outer, dp_shard: 4 ranks)", for messages.
  std::string describeSubmesh(uint32_t index) const;

  /// A sharded parameter is 1-D and its pieces hold its full shape.
  void verifySharding(const fb::Parameter &param,
                      const std::string &where) const;
  /// split only on inputs with a dim 0 that the group multiplies.
  void verifySplit(const fb::TensorSpec &spec, bool isInput,
                   const std::string &where) const;

private:
  const fb::Program &program_;
  std::vector<int64_t> groupSizes_;
};

} // namespace megrt

#endif // MEGRT_SRC_MESHVERIFIER_H
