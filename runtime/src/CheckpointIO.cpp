// Parameter and training-state files of a session (CheckpointIO.h).
#include "CheckpointIO.h"

#include "Fail.h"
#include "HfCheckpoint.h"
#include "TensorChecks.h"
#include "TensorSink.h"
#include "comm/Communicator.h"
#include "megrt/Safetensors.h"

#include <cstring>
#include <set>

namespace megrt {
namespace {
/// `tensor` as a `dtype` tensor of `shape`: a model weight of another
/// floating-point dtype is converted into `storage` (a bf16 checkpoint into
/// an f32 model); anything else must match exactly.
const Tensor &asWeight(const Tensor &tensor, DType dtype, const Shape &shape,
                       bool convert, const std::string &what, Tensor &storage) {
  const Tensor *result = &tensor;
  if (convert && tensor.dtype() != dtype && isFloatingPoint(tensor.dtype()) &&
      isFloatingPoint(dtype)) {
    checkTensorMatches(tensor, tensor.dtype(), shape, what);
    storage = Tensor::fromFloats(dtype, tensor.shape(), tensor.toFloats());
    result = &storage;
  }
  checkTensorMatches(*result, dtype, shape, what);
  return *result;
}

/// The whole tensor of a parameter that model checkpoints hold in parts
/// (its slices along dim 0, `spec.parts`), in the parameter's dtype: parts
/// of another floating-point dtype are converted, as whole weights are.
Tensor stackParts(const std::map<std::string, Tensor> &tensors,
                  const ParameterSpec &spec, const Shape &whole,
                  const std::string &path) {
  Shape partShape(whole.begin() + 1, whole.end());
  Tensor stacked(spec.dtype, whole);
  size_t offset = 0;
  for (size_t e = 0; e < spec.parts.size(); ++e) {
    auto it = tensors.find(spec.parts[e]);
    if (it == tensors.end())
      fail("'", path, "': missing parameter '", spec.name, "' (expected ",
           formatType(spec.dtype, whole), ") or its part ", e, " '",
           spec.parts[e], "' (expected ", formatType(spec.dtype, partShape),
           ")");
    std::string what =
        concat("'", path, "': tensor '", spec.parts[e], "' (part ", e,
               " of parameter '", spec.name, "')");
    Tensor converted;
    const Tensor &part = asWeight(it->second, spec.dtype, partShape,
                                  /*convert=*/true, what, converted);
    std::memcpy(stacked.data() + offset, part.data(), part.sizeBytes());
    offset += part.sizeBytes();
  }
  return stacked;
}

} // namespace

void loadCheckpointFile(ParameterStore &store, const Program &program,
                        const std::string &path, bool allowExtra,
                        bool withState, bool checkFiniteValues,
                        std::map<std::string, std::string> *metadata) {
  std::map<std::string, Tensor> tensors =
      metadata ? readSafetensors(path, metadata) : readCheckpoint(path);
  const std::vector<ParameterSpec> &specs = program.parameters();
  auto wanted = [&](const ParameterSpec &spec) {
    return withState || !spec.state;
  };
  // The file's tensor for each wanted parameter: under its name or, failing
  // that, one of its aliases (a tied lm_head.weight).
  // A parameter held in parts (stacked experts) is stacked from them
  // unless the file holds it whole (a training-state file).
  std::vector<const Tensor *> found(specs.size(), nullptr);
  std::vector<Tensor> stacked(specs.size());
  std::set<std::string> known;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec &spec = specs[i];
    known.insert(spec.name);
    known.insert(spec.aliases.begin(), spec.aliases.end());
    known.insert(spec.parts.begin(), spec.parts.end());
    if (!wanted(spec))
      continue;
    auto match = tensors.find(spec.name);
    for (size_t a = 0; match == tensors.end() && a < spec.aliases.size(); ++a)
      match = tensors.find(spec.aliases[a]);
    if (match == tensors.end() && !spec.parts.empty()) {
      stacked[i] =
          stackParts(tensors, spec, ParameterStore::fileShape(spec), path);
      found[i] = &stacked[i];
      continue;
    }
    if (match == tensors.end())
      fail("'", path, "': missing parameter '", spec.name, "' (expected ",
           formatType(spec.dtype, spec.shape), ")");
    found[i] = &match->second;
  }
  if (!allowExtra)
    for (const auto &[name, tensor] : tensors)
      if (!known.count(name))
        fail("'", path, "': tensor '", name,
             "' is not a parameter of the program (pass allowExtra to "
             "ignore it)");
  // Check everything before writing anything, so that a bad file leaves the
  // parameters as they were: names, dtypes, shapes and (unless turned off)
  // finite values. Model weights of another floating-point dtype
  // are converted (a bf16 checkpoint into an f32 model); training state must
  // match exactly.
  std::vector<Tensor> converted(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!found[i])
      continue;
    const ParameterSpec &spec = specs[i];
    std::string what = concat("'", path, "': parameter '", spec.name, "'");
    found[i] = &asWeight(*found[i], spec.dtype, ParameterStore::fileShape(spec),
                         /*convert=*/!spec.state, what, converted[i]);
    if (checkFiniteValues)
      checkFinite(*found[i], what);
    if (spec.nonNegative)
      checkNonNegative(*found[i], what);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!found[i])
      continue;
    const Tensor &tensor = *found[i];
    if (specs[i].sharding)
      store.write(i, store.localPiece(specs[i], tensor).data());
    else
      store.write(i, tensor.data());
  }
  // Master weights follow newly loaded weights; a full state brings its own.
  if (!withState)
    store.refreshCopies();
}

void saveCheckpointFile(const ParameterStore &store, const Program &program,
                        const std::string &path, bool withState,
                        uint64_t maxShardBytes,
                        const std::map<std::string, std::string> &metadata) {
  // What is written, in parameter order: each parameter whole, or (model
  // checkpoints hold stacked experts one tensor per expert, as Hugging
  // Face's do; training-state files hold them whole) each of its parts.
  struct Item {
    size_t parameter;
    int part; // -1: the whole parameter
  };
  const std::vector<ParameterSpec> &specs = program.parameters();
  std::vector<TensorInfo> tensors;
  std::vector<Item> items;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec &spec = specs[i];
    if (!withState && spec.state)
      continue;
    const Shape &whole = ParameterStore::fileShape(spec);
    if (!withState && !spec.parts.empty()) {
      Shape partShape(whole.begin() + 1, whole.end());
      for (size_t e = 0; e < spec.parts.size(); ++e) {
        tensors.push_back({spec.parts[e], spec.dtype, partShape});
        items.push_back({i, static_cast<int>(e)});
      }
    } else {
      tensors.push_back({spec.name, spec.dtype, whole});
      items.push_back({i, -1});
    }
  }
  bool directory = !withState && isCheckpointDirectory(path);
  std::vector<size_t> order =
      directory ? checkpointDirectoryOrder(tensors, maxShardBytes)
                : safetensorsOrder(tensors);
  // Rank 0 writes, one tensor at a time as the files take them; every rank
  // gathers the sharded parameters in that order. Nothing holds the whole
  // model: a gathered parameter is dropped once written (a stacked one
  // once its last part is).
  bool writer = store.rank() == 0;
  std::unique_ptr<TensorSink> sink;
  std::string error;
  if (writer) {
    try {
      sink = directory ? openCheckpointDirectory(
                             path, tensors, program.hfConfig(), maxShardBytes)
                       : openSafetensors(path, tensors, metadata);
    } catch (const std::exception &failure) {
      error = failure.what();
    }
  }
  std::map<size_t, std::pair<Tensor, size_t>> held;
  for (size_t k : order) {
    const Item &item = items[k];
    const ParameterSpec &spec = specs[item.parameter];
    size_t offset =
        item.part < 0 ? 0 : static_cast<size_t>(item.part) * tensors[k].bytes();
    Tensor gathered;
    const uint8_t *data = nullptr;
    if (spec.sharding && item.part < 0) {
      gathered = store.gather(item.parameter);
      data = gathered.data();
    } else if (spec.sharding) {
      auto it = held.find(item.parameter);
      if (it == held.end())
        it = held.emplace(item.parameter,
                          std::make_pair(store.gather(item.parameter),
                                         spec.parts.size()))
                 .first;
      data = it->second.first.data() + offset;
    } else if (spec.pipelineOwner >= 0) {
      // Stacked parts of a pipeline stage's parameter: brought over once.
      auto it = held.find(item.parameter);
      if (it == held.end())
        it =
            held.emplace(item.parameter,
                         std::make_pair(store.fromOwner(item.parameter),
                                        std::max<size_t>(spec.parts.size(), 1)))
                .first;
      data = it->second.first.data() + offset;
    } else if (writer) {
      data = store.read(item.parameter).data() + offset;
    }
    if (writer && sink) {
      try {
        sink->add(data);
      } catch (const std::exception &failure) {
        error = failure.what();
        sink.reset();
      }
    }
    if ((spec.sharding && item.part >= 0) ||
        (!spec.sharding && spec.pipelineOwner >= 0)) {
      auto it = held.find(item.parameter);
      if (--it->second.second == 0)
        held.erase(it);
    }
  }
  if (writer && sink) {
    try {
      sink->finish();
    } catch (const std::exception &failure) {
      error = failure.what();
    }
  }
  // Every rank learns rank 0's outcome, so that all fail together.
  if (comm::World *world = store.world()) {
    uint64_t length = error.size();
    world->broadcast(&length, sizeof(length), 0);
    error.resize(length);
    if (length)
      world->broadcast(error.data(), length, 0);
  }
  if (!error.empty())
    fail(error);
}

} // namespace megrt
