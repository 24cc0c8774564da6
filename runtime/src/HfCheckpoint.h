// Checkpoints in Hugging Face layout: a directory holding model.safetensors,
// or shards listed by model.safetensors.index.json, and config.json.
#ifndef MEGRT_SRC_HFCHECKPOINT_H
#define MEGRT_SRC_HFCHECKPOINT_H

#include "TensorSink.h"
#include "megrt/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megrt {

/// Every tensor of `path`: a safetensors file, or a directory with
/// model.safetensors.index.json (every shard it names is read, and each
/// tensor must be in the shard the index says) or model.safetensors. Errors
/// name the file.
std::map<std::string, Tensor> readCheckpoint(const std::string &path);

/// Whether `path` names a checkpoint directory rather than a file: an
/// existing directory, or a path ending in '/'.
bool isCheckpointDirectory(const std::string &path);

/// A sink writing `tensors` into directory `dir`, created if missing:
/// model.safetensors, or, above `maxShardBytes`, shards
/// model-0000i-of-0000n.safetensors (filled in the given order) with
/// model.safetensors.index.json written last; config.json when `config` is
/// not empty. Checkpoint files of an earlier save in `dir` are removed when
/// it finishes, so the directory holds one checkpoint. It takes the
/// tensors in checkpointDirectoryOrder.
std::unique_ptr<TensorSink>
openCheckpointDirectory(const std::string &dir,
                        const std::vector<TensorInfo> &tensors,
                        const std::string &config, uint64_t maxShardBytes);
std::vector<size_t>
checkpointDirectoryOrder(const std::vector<TensorInfo> &tensors,
                         uint64_t maxShardBytes);

/// The default shard size of transformers' save_pretrained (50 GB).
inline constexpr uint64_t kDefaultMaxShardBytes = 50'000'000'000;

} // namespace megrt

#endif // MEGRT_SRC_HFCHECKPOINT_H
