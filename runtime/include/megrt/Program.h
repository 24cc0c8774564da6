// A loaded and verified megc artifact, independent of any device.
#ifndef MEGRT_PROGRAM_H
#define MEGRT_PROGRAM_H

#include "megrt/DType.h"
#include "megrt/Shape.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace megrt {

struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
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

struct ShardingSpec {
  std::string mesh;
  std::vector<std::string> axes;
  int64_t dim;
};

struct ParameterSpec {
  std::string name;
  DType dtype;
  Shape shape;
  bool trainable;
  InitKind initKind;
  double initScale;
  std::optional<ShardingSpec> sharding;
  /// Training state (optimizer moments, step count), not a model weight.
  bool state = false;
  /// For InitKind::Copy: the parameter it copies.
  std::string initSource;
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
};

struct KernelSpec {
  std::string name;
  std::string cpuSymbol;
  uint32_t numArgs;
  /// The .entry names of its CUDA launches, in launch order.
  std::vector<std::string> cudaEntries;
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

  /// nullptr if there is no entry of that name.
  const EntrySpec *findEntry(std::string_view name) const;
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
};

} // namespace megrt

#endif // MEGRT_PROGRAM_H
