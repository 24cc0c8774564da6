//===- CheckpointIO.h - a session's parameter and state files ------------===//
//
// Reads a session's parameters (model weights, or with the training state)
// from safetensors files or Hugging Face checkpoint directories, and writes
// them: sharded parameters are gathered to rank 0, which writes; stacked
// experts go out and come in one tensor per expert, as Hugging Face keeps
// them. A bad file changes nothing: every tensor is checked before any is
// written.
//
//===----------------------------------------------------------------------===//

#ifndef MEGRT_SRC_CHECKPOINTIO_H
#define MEGRT_SRC_CHECKPOINTIO_H

#include "ParameterStore.h"

#include <cstdint>
#include <map>
#include <string>

namespace megrt {

/// Loads `path` into `store`: the model weights, and the training state
/// too with `withState`. Tensors that are no parameter are an error unless
/// `allowExtra`; non-finite values are unless `checkFiniteValues` is off.
/// With `metadata`, `path` is one safetensors file whose metadata it
/// receives.
void loadCheckpointFile(ParameterStore &store, const Program &program,
                        const std::string &path, bool allowExtra,
                        bool withState, bool checkFiniteValues,
                        std::map<std::string, std::string> *metadata);

/// Writes the model weights (with `withState`, the training state too) to
/// `path`: a safetensors file with `metadata`, or a Hugging Face directory
/// of shards of at most `maxShardBytes`. Every rank must call it.
void saveCheckpointFile(const ParameterStore &store, const Program &program,
                        const std::string &path, bool withState,
                        uint64_t maxShardBytes,
                        const std::map<std::string, std::string> &metadata);

} // namespace megrt

#endif // MEGRT_SRC_CHECKPOINTIO_H
