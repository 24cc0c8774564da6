// Plain descriptions of artifacts, turned into FlatBuffers bytes for tests.
#ifndef MEGRT_TEST_ARTIFACTBUILDER_H
#define MEGRT_TEST_ARTIFACTBUILDER_H

#include "megrt/FormatVersion.h"
#include "megrt/Shape.h"
#include "megrt/megc_generated.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace megrt::test {

struct TensorDesc {
  std::string name;
  fb::DType dtype = fb::DType::f32;
  Shape shape;
  /// A submesh index for a split input, -1 for none.
  int32_t split = -1;
};

struct ShardingDesc {
  uint32_t submesh = 0;
  Shape fullShape;
  /// -1: a piece of the flattened tensor; otherwise a block along `dim`.
  int dim = -1;
  /// With `dim`: the submesh whose group cuts the blocks that the pieces
  /// split; -1 for none.
  int blockSubmesh = -1;
};

struct ParamDesc {
  std::string name;
  fb::DType dtype = fb::DType::f32;
  Shape shape;
  fb::InitKind init = fb::InitKind::zeros;
  double scale = 0.0;
  bool trainable = true;
  std::optional<ShardingDesc> sharding;
  bool state = false;
  /// For fb::InitKind::copy.
  std::string initSource;
  /// The checkpoint names of its slices along dim 0.
  std::vector<std::string> parts;
};

struct BufferDesc {
  fb::BufferKind kind = fb::BufferKind::arena;
  uint32_t index = 0;
  uint64_t offset = 0;
  fb::DType dtype = fb::DType::f32;
  Shape shape;
  /// Defaults to dtype x shape.
  std::optional<uint64_t> sizeBytes;
};

struct LaunchDesc {
  uint32_t kernel = 0;
  std::vector<uint32_t> args;
};

struct GemmDesc {
  uint32_t a = 0, b = 0, c = 0;
  int32_t bias = -1;
  int64_t m = 1, n = 1, k = 1, batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 0.0f;
  fb::DType dtype = fb::DType::f32;
  fb::GemmEpilogue epilogue = fb::GemmEpilogue::none;
};

struct CopyDesc {
  uint32_t src = 0, dst = 0;
  uint64_t srcOffset = 0, dstOffset = 0, bytes = 0;
};

struct CollectiveDesc {
  /// A line of megrt/Collectives.def (or any name, for the verifier).
  const char *kind = "all_reduce";
  uint32_t submesh = 0;
  fb::ReduceOp reduce = fb::ReduceOp::sum;
  fb::DType dtype = fb::DType::f32;
  uint64_t count = 0;
  uint32_t src = 0, dst = 0;
  bool async = false;
  std::vector<int64_t> params = {};
};

struct WaitDesc {
  uint32_t collective = 0;
};

/// A LibraryCall: operands are buffer indices (-1: left out).
struct LibraryCallDesc {
  std::string name;
  std::vector<int32_t> operands;
  std::vector<int64_t> params;
};

/// An Attention command, or with `backward` an AttentionGrad; `stats` -1:
/// none.
struct AttentionDesc {
  bool backward = false;
  uint32_t q = 0, k = 0, v = 0, out = 0;
  uint32_t gradOut = 0, gradQ = 0, gradK = 0, gradV = 0;
  int32_t stats = -1;
  int64_t batch = 1, seqQ = 1, seqKv = 1, heads = 1, kvHeads = 1, headDim = 1,
          valueDim = 1;
  bool causal = false;
  float scale = 1.0f;
  fb::DType dtype = fb::DType::f32;
};

/// std::monostate writes a command without an operation.
using CommandDesc =
    std::variant<LaunchDesc, GemmDesc, CopyDesc, CollectiveDesc, WaitDesc,
                 LibraryCallDesc, AttentionDesc, std::monostate>;

struct GraphDesc {
  std::string name;
  uint32_t first = 0;
  uint32_t count = 0;
  bool shareIo = false;
  bool forwardOnly = false;
};

struct EntryDesc {
  std::string name;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<BufferDesc> buffers;
  std::vector<CommandDesc> commands;
  uint64_t arenaBytes = 0;
  uint64_t peakBytes = 0;
  uint64_t unplannedBytes = 0;
  std::vector<GraphDesc> graphs;
};

/// A dispatch argument: kernel argument `value`, or scratch + `value`
/// bytes.
struct DispatchArgDesc {
  bool scratch = false;
  uint64_t value = 0;
};

inline DispatchArgDesc kernelArg(uint64_t index) { return {false, index}; }
inline DispatchArgDesc scratchArg(uint64_t offset) { return {true, offset}; }

/// A dispatch of a kernel's CPU or CUDA code (block is CUDA's only).
struct DispatchDesc {
  std::string entry;
  std::vector<uint32_t> grid = {1};
  std::vector<uint32_t> block = {1};
  uint32_t sharedBytes = 0;
  std::vector<DispatchArgDesc> args;
};

struct KernelDesc {
  std::string name;
  /// Shorthand for CPU code of one dispatch of one workgroup calling this
  /// symbol on the kernel's arguments in order (when cpuDispatches is
  /// empty).
  std::string cpuSymbol;
  uint32_t numArgs = 0;
  std::vector<DispatchDesc> cudaLaunches;
  uint64_t cudaScratchBytes = 0;
  std::vector<DispatchDesc> cpuDispatches;
  uint64_t cpuScratchBytes = 0;
};

struct CudaModuleDesc {
  std::string arch = "sm_90";
  std::string ptx;
  std::vector<uint8_t> cubin;
};

struct MeshDesc {
  std::string name = "world";
  std::vector<std::pair<std::string, int64_t>> axes;
};

struct ProgramDesc {
  uint32_t formatVersion = kFormatVersion;
  std::string producer = "megrt-test";
  std::vector<ParamDesc> params;
  std::vector<EntryDesc> entries;
  std::vector<KernelDesc> kernels;
  /// Written as the CpuModule when set.
  std::optional<std::vector<uint8_t>> cpuObject;
  std::string targetTriple;
  /// CpuModule.features: extensions the CPU code needs.
  std::vector<std::string> cpuFeatures;
  std::optional<CudaModuleDesc> cuda;
  std::optional<MeshDesc> mesh;
  /// The axes of each submesh.
  std::vector<std::vector<std::string>> submeshes;
};

std::vector<uint8_t> buildArtifact(const ProgramDesc &desc);

/// Shorthands for buffers of f32 tensors.
BufferDesc arenaBuffer(uint64_t offset, Shape shape,
                       fb::DType dtype = fb::DType::f32);
BufferDesc inputBuffer(uint32_t index, Shape shape,
                       fb::DType dtype = fb::DType::f32);
BufferDesc outputBuffer(uint32_t index, Shape shape,
                        fb::DType dtype = fb::DType::f32);
BufferDesc paramBuffer(uint32_t index, Shape shape,
                       fb::DType dtype = fb::DType::f32);

} // namespace megrt::test

#endif // MEGRT_TEST_ARTIFACTBUILDER_H
