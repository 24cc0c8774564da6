// A loaded and verified megc artifact, independent of any device.
#ifndef MEGRT_PROGRAM_H
#define MEGRT_PROGRAM_H

#include "megrt/DType.h"
#include "megrt/Shape.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace megrt {

/// An input or output of an entry. `shape` is what one rank's device
/// holds.
struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
  /// Data parallelism (inputs only): an index into Program::submeshes().
  /// Session::run takes the global tensor, whose dim 0 is shape[0] times
  /// the group size, and rank i of the group runs on rows
  /// [i * shape[0], (i + 1) * shape[0]).
  std::optional<uint32_t> split;
  /// An integer input used as an index: every value must lie in
  /// [0, indexBound), checked by Session::run (0: not an index); indexUse
  /// says what it indexes.
  int64_t indexBound = 0;
  std::string indexUse;
  /// A value allowed besides [0, indexBound): the label the loss ignores.
  std::optional<int64_t> indexIgnore;
};

/// Copy: the value of the parameter `initSource`, converted to this one's
/// dtype (master weights); it follows its source whenever model weights are
/// initialised, set or loaded, and is only loaded itself with the state.
enum class InitKind : uint8_t {
  Zeros = 0,
  Ones = 1,
  Normal = 2,
  Uniform = 3,
  Copy = 4
};

const char *initKindName(InitKind kind);

/// The parameter is this rank's piece of a larger tensor of shape
/// `fullShape`, split over the group Program::submeshes()[submesh]; rank i
/// of the group holds piece i. Without `dim`, the tensor is flattened
/// row-major and zero-padded to n * group size elements, where [n] is the
/// parameter's (1-D) shape, and piece i is elements [i * n, (i + 1) * n).
/// With `dim`, the tensor is cut along that dimension into group size equal
/// blocks and piece i is block i (tensor parallelism). With `dim` and
/// `blockSubmesh`, the tensor is cut along `dim` into blocks over the group
/// of Program::submeshes()[*blockSubmesh], and this rank's block is split
/// into flat pieces over the group of `submesh` (FSDP over tensor
/// parallelism).
struct ShardingSpec {
  uint32_t submesh;
  Shape fullShape;
  std::optional<int> dim;
  std::optional<uint32_t> blockSubmesh;

  /// Whether the parameter is a 1-D piece of a flattened tensor.
  bool flat() const { return !dim || blockSubmesh; }
};

struct MeshAxis {
  std::string name;
  int64_t size;
};

/// The devices of a run: one rank per device, numbered row-major over the
/// axes (the last axis varies fastest).
struct MeshSpec {
  std::string name;
  std::vector<MeshAxis> axes;
  /// The product of the axes' sizes.
  int64_t numRanks;
};

/// A registered group of mesh axes; a Session creates one communicator for
/// each submesh that a collective uses. A rank's index in the group is
/// row-major over its coordinates on `axes`, in this order.
struct SubmeshSpec {
  std::vector<std::string> axes;
  /// Index in MeshSpec::axes of each of `axes`.
  std::vector<size_t> axisIndices;
  /// The product of the sizes of `axes`: the ranks of one group.
  int64_t size;
};

struct ParameterSpec {
  std::string name;
  DType dtype;
  Shape shape;
  bool trainable;
  InitKind initKind;
  double initScale;
  /// Set when the parameter holds one rank's piece of a larger tensor.
  std::optional<ShardingSpec> sharding;
  /// Training state (optimizer moments, step count), not a model weight.
  bool state = false;
  /// For InitKind::Copy: the parameter it copies. A sharded copy's source
  /// is either replicated, with the copy's full shape (the copy holds the
  /// piece of it), or sharded in the same way (elementwise).
  std::string initSource;
  /// Other names checkpoints may hold the parameter under (a tied
  /// lm_head.weight).
  std::vector<std::string> aliases;
  /// The names model checkpoints hold its slices along dim 0 under, in
  /// order (stacked experts, one tensor each); empty: it is held whole.
  /// Training-state files hold the whole tensor under `name`.
  std::vector<std::string> parts;
  /// Never negative (a second moment, the step count): checked on load.
  bool nonNegative = false;
  /// Under a pipeline: the rank of the group of submesh pipelineSubmesh
  /// whose stage updates it (the others' copies go stale); -1: every rank
  /// holds its current value.
  int32_t pipelineSubmesh = -1, pipelineOwner = -1;
};

/// Megatron's learning-rate schedule (schema table LrSchedule): before a run
/// of an entry that reads parameter `lrParameter`, the runtime writes
/// learningRateAt(n) there, n being the value of `stepParameter` (the
/// updates done so far, counted from 0).
struct LrScheduleSpec {
  enum class Kind { Constant, Linear, Cosine, Wsd };
  enum class WsdStyle { Linear, Cosine, Exponential, MinusSqrt };
  Kind kind;
  double maxLr, minLr, initLr;
  int64_t warmup, decay, wsdDecay;
  WsdStyle wsdStyle;
  size_t lrParameter, stepParameter;

  double learningRateAt(int64_t n) const;
};

struct MemoryPlanInfo {
  uint64_t arenaBytes = 0;
  uint64_t peakBytes = 0;
  uint64_t unplannedBytes = 0;
};

struct EntrySpec {
  std::string name;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  MemoryPlanInfo plan;
  size_t numBuffers;
  size_t numCommands;
  /// Floating-point operations of one run in GEMMs and attention.
  uint64_t flops = 0;
  /// A pipeline stage's program: run by the ranks at index pipelineRank of
  /// the group of submesh stageSubmesh (-1: by every rank). A Session keeps
  /// its own rank's (Program::selectPipelineRank).
  int32_t stageSubmesh = -1, pipelineRank = -1;
};

/// One dispatch of a kernel's code: its entry (a CPU symbol or a CUDA
/// .entry) and the number of workgroups (CUDA blocks) it runs.
struct DispatchSpec {
  std::string entry;
  uint64_t workgroups = 0;
};

/// A kernel's code for one target (empty without one): the strategy the
/// compiler chose (serial, pointwise, row_reduction, column_reduction,
/// full_reduction), its domain, tile and vector width, and its dispatches.
struct KernelCodeSpec {
  std::string strategy;
  Shape domain, tile;
  uint32_t vectorWidth = 0;
  std::vector<DispatchSpec> dispatches;
  uint64_t scratchBytes = 0;
};

struct KernelSpec {
  std::string name;
  uint32_t numArgs;
  KernelCodeSpec cpu, cuda;
};

/// Immutable and cheap to copy: copies share the artifact bytes. Loading
/// verifies the artifact completely, so that executing any entry of a loaded
/// program stays inside its buffers.
class Program {
public:
  /// Throws megrt::Error if the file cannot be read or fails verification.
  static Program load(const std::string &path);
  static Program fromBytes(std::vector<uint8_t> bytes);
  static Program fromBytes(const void *data, size_t size);

  uint32_t formatVersion() const;
  const std::string &producer() const;
  const std::vector<ParameterSpec> &parameters() const;
  const std::vector<EntrySpec> &entries() const;
  const std::vector<KernelSpec> &kernels() const;
  bool hasCpuModule() const;
  bool hasCudaModule() const;
  /// The mesh the program runs on; nullopt for a single-rank program.
  const std::optional<MeshSpec> &mesh() const;
  const std::vector<SubmeshSpec> &submeshes() const;
  /// The model's Hugging Face config.json text, or empty.
  const std::string &hfConfig() const;
  /// The learning-rate schedule; nullopt when the rate is compiled in.
  const std::optional<LrScheduleSpec> &lrSchedule() const;
  /// "@world [dp_outer=2, dp_shard=2]", or "(no mesh)", for messages.
  std::string describeMesh() const;
  /// FNV-1a 64 of the artifact (the seal, megrt/ArtifactSeal.h): equal
  /// checksums mean the same artifact.
  uint64_t checksum() const;

  /// The selected entry of that name (this rank's stage of a pipeline);
  /// nullptr if there is none.
  const EntrySpec *findEntry(std::string_view name) const;
  /// Keeps, of each pipeline stage's entries, the one whose pipelineRank is
  /// this rank's index in its stage submesh's group (`indexInGroup`); a
  /// Session does this for its rank.
  void
  selectPipelineRank(const std::function<int(uint32_t submesh)> &indexInGroup);
  /// Index into parameters(), or nullopt.
  std::optional<size_t> findParameter(std::string_view name) const;

  /// The verified FlatBuffers bytes (root type megrt.fb.Program), for
  /// backends and tools that read the schema directly.
  const uint8_t *bytes() const;
  size_t size() const;

  struct Impl;

private:
  explicit Program(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  /// Per entry: another pipeline rank's program, which findEntry skips.
  std::vector<bool> otherRank_;
};

} // namespace megrt

#endif // MEGRT_PROGRAM_H
