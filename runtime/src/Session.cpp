// Executes the entries of a program on a device, owning its parameters.
#include "megrt/Session.h"

#include "Device.h"
#include "Fail.h"
#include "FbTypes.h"
#include "HfCheckpoint.h"
#include "MeshLayout.h"
#include "ParameterInit.h"
#include "RankAgreement.h"
#include "Trace.h"
#include "comm/Communicator.h"
#include "comm/LaunchEnvironment.h"
#include "cpu/ThreadPool.h"
#include "megrt/Safetensors.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <unistd.h>

namespace megrt {
namespace {

std::string joinNames(const std::vector<std::string> &names) {
  if (names.empty())
    return "(none)";
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

template <typename Specs> std::string joinSpecNames(const Specs &specs) {
  std::vector<std::string> names;
  for (const auto &spec : specs)
    names.push_back(spec.name);
  return joinNames(names);
}

/// `what` must have `spec`'s dtype and shape.
void checkTensorMatches(const Tensor &tensor, DType dtype, const Shape &shape,
                        const std::string &what) {
  if (tensor.dtype() != dtype)
    fail(what, " has dtype ", dtypeName(tensor.dtype()), ", expected ",
         dtypeName(dtype));
  if (tensor.shape() != shape)
    fail(what, " has shape ", formatShape(tensor.shape()), ", expected ",
         formatShape(shape));
}

/// Fails naming the first NaN or infinity of a floating-point tensor.
void checkFinite(const Tensor &tensor, const std::string &what) {
  if (!isFloatingPoint(tensor.dtype()))
    return;
  // In place, without a widened copy (a checkpoint's every weight passes
  // here): NaN and infinity are the values whose exponent bits are all
  // ones, in every floating-point dtype.
  auto count = static_cast<size_t>(tensor.numElements());
  size_t i = 0;
  bool nan = false;
  if (tensor.dtype() == DType::F32) {
    const float *values = tensor.dataAs<float>();
    while (i < count && std::isfinite(values[i]))
      ++i;
    nan = i < count && values[i] != values[i];
  } else {
    uint16_t exponent = tensor.dtype() == DType::BF16 ? 0x7f80 : 0x7c00;
    const uint16_t *bits = tensor.dataAs<uint16_t>();
    while (i < count && (bits[i] & exponent) != exponent)
      ++i;
    nan = i < count && (bits[i] & 0x7fff) != exponent;
  }
  if (i < count) {
    std::string index;
    size_t rest = i;
    for (size_t d = tensor.shape().size(); d-- > 0;) {
      auto dim = static_cast<size_t>(tensor.shape()[d]);
      index = concat(rest % dim, index.empty() ? "" : ", ", index);
      rest /= dim;
    }
    fail(what, " holds ", nan ? "NaN" : "an infinity", " at element ", i,
         " (index [", index,
         "]); a run from it would be meaningless (turn the check off with "
         "--no-check-finite / SessionOptions::checkFinite)");
  }
}

/// Fails naming the first negative element (NaN passes: checkFinite's).
void checkNonNegative(const Tensor &tensor, const std::string &what) {
  std::vector<float> values = tensor.toFloats();
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0)
      fail(what, " holds ", values[i], " at element ", i,
           ", but it is never negative (a second moment or a step count)");
}

/// The world of a program with a mesh, with the mesh's number of ranks and
/// the same artifact on every rank; null without a mesh.
comm::World *connect(const Program &program, double timeoutSeconds) {
  if (!program.mesh())
    return nullptr;
  comm::WorldOptions options;
  options.timeoutSeconds = timeoutSeconds;
  comm::World &world = comm::connectWorld(options);
  int64_t needed = program.mesh()->numRanks;
  // Checked before any communication, so that each rank fails alone.
  if (world.size() != needed)
    fail("the artifact's mesh ", program.describeMesh(), " needs ", needed,
         " ranks, but this run has ", world.size(), " (", world.describe(),
         "; start it with mpirun -n ", needed, ")");
  checkSameArtifact(program.checksum(), world);
  return &world;
}

/// Rank N > 0 of a multi-rank run writes "DIR/STEM.rankN.EXT".
std::string tracePathOf(const std::string &path, int rank) {
  if (path.empty() || rank == 0)
    return path;
  std::filesystem::path file(path);
  return (file.parent_path() / concat(file.stem().string(), ".rank", rank,
                                      file.extension().string()))
      .string();
}

/// Elements [first, first + shape[0]) of `full` (dim 0 rows when `full` is
/// the global tensor of a split input, elements of the flattened tensor
/// for a sharded parameter), zero past its end.
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

} // namespace

LaunchedRank launchedRank() {
  comm::LaunchEnvironment environment = comm::readLaunchEnvironment();
  return {environment.rank, environment.size};
}

struct Session::Impl {
  Impl(Program program, SessionOptions options)
      : program(std::move(program)), options(std::move(options)),
        world(connect(this->program, this->options.commTimeoutSeconds)),
        layout(this->program), rank(world ? world->rank() : 0),
        tracePath(tracePathOf(this->options.traceFile, rank)) {
    if (!tracePath.empty())
      trace = std::make_unique<Trace>();
  }

  ~Impl() {
    // Nothing ran in a Session whose device could not be created, and a
    // writeTrace() after the last event already reported its outcome.
    if (!trace || !device || eventsAtLastWrite == trace->numEvents())
      return;
    // A destructor cannot throw, and a lost trace must not go unnoticed.
    try {
      trace->write(tracePath);
    } catch (const std::exception &error) {
      std::cerr << "megrt: the trace was not written: " << error.what() << "\n";
    }
  }

  const ParameterSpec &parameterSpec(std::string_view name,
                                     size_t &index) const {
    std::optional<size_t> found = program.findParameter(name);
    if (!found)
      fail("unknown parameter '", name, "'");
    index = *found;
    return program.parameters()[index];
  }

  /// Every write of a host parameter goes through here, so that the device
  /// can mirror it.
  void write(size_t index, const void *data) {
    std::memcpy(parameters[index].data(), data, parameters[index].sizeBytes());
    device->parameterWritten(index);
  }

  /// Writes the schedule's learning rate for the coming update into the lr
  /// parameter, before an entry that reads it runs.
  void applyLrSchedule(size_t entry) {
    const std::optional<LrScheduleSpec> &schedule = program.lrSchedule();
    if (!schedule || !readsParameter(entry, schedule->lrParameter))
      return;
    float done = *read(schedule->stepParameter).dataAs<float>();
    auto rate = static_cast<float>(
        schedule->learningRateAt(static_cast<int64_t>(done)));
    if (*parameters[schedule->lrParameter].dataAs<float>() != rate ||
        !lrWritten) {
      write(schedule->lrParameter, &rate);
      lrWritten = true;
    }
    learningRate = rate;
  }

  /// Whether entry `entry` has a buffer on parameter `index`.
  bool readsParameter(size_t entry, size_t index) const {
    const fb::Entry &spec = *fb::GetProgram(program.bytes())->entries()->Get(
        static_cast<uint32_t>(entry));
    for (uint32_t i = 0; i < sizeOf(spec.buffers()); ++i) {
      const fb::Buffer &buffer = *spec.buffers()->Get(i);
      if (buffer.kind() == fb::BufferKind::parameter && buffer.index() == index)
        return true;
    }
    return false;
  }

  const Tensor &read(size_t index) const {
    device->parameterRead(index);
    return parameters[index];
  }

  /// Re-derives the copies (master weights) of `source`, or of every
  /// parameter when it is not given, from the current weights.
  void refreshCopies(std::optional<size_t> source = std::nullopt) {
    const std::vector<ParameterSpec> &specs = program.parameters();
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].initKind != InitKind::Copy)
        continue;
      size_t from = *program.findParameter(specs[i].initSource);
      if (source && from != *source)
        continue;
      // Verification allows a piece's copy of a source that holds what the
      // pieces split (the whole tensor, or this rank's block of it), or
      // of a source sharded the same way.
      bool sourceFlat = specs[from].sharding && specs[from].sharding->flat();
      if (specs[i].sharding && specs[i].sharding->flat() && !sourceFlat)
        copyParameterPiece(parameters[i], read(from), pieceStart(specs[i]));
      else
        copyParameter(parameters[i], read(from));
      device->parameterWritten(i);
    }
  }

  /// Where this rank's piece of a flattened sharded parameter starts in the
  /// flattened full tensor.
  int64_t pieceStart(const ParameterSpec &spec) const {
    return layout.indexInGroup(spec.sharding->submesh, rank) * spec.shape[0];
  }

  /// The group that cuts a sharded parameter into blocks, and the shape
  /// of a block.
  uint32_t blockGroup(const ShardingSpec &sharding) const {
    return sharding.blockSubmesh ? *sharding.blockSubmesh : sharding.submesh;
  }
  Shape blockShape(const ShardingSpec &sharding) const {
    Shape shape = sharding.fullShape;
    shape[*sharding.dim] /= layout.groupSize(blockGroup(sharding));
    return shape;
  }

  /// This rank's piece of `full`, a whole sharded parameter: its block
  /// along the sharding's dim, its range of the flattened tensor, or its
  /// range of its flattened block.
  Tensor localPiece(const ParameterSpec &spec, const Tensor &full) const {
    const ShardingSpec &sharding = *spec.sharding;
    if (!sharding.dim)
      return pieceOf(full, pieceStart(spec), spec.shape);
    Tensor block(full.dtype(), blockShape(sharding));
    size_t bytes = elementSize(full.dtype());
    forEachBlockRun(sharding.fullShape, block.shape(), *sharding.dim,
                    layout.indexInGroup(blockGroup(sharding), rank),
                    [&](int64_t inBlock, int64_t inWhole, int64_t count) {
                      std::memcpy(block.data() + inBlock * bytes,
                                  full.data() + inWhole * bytes,
                                  count * bytes);
                    });
    if (sharding.blockSubmesh)
      return pieceOf(block, pieceStart(spec), spec.shape);
    return block;
  }

  /// Calls `copy(inBlock, inWhole, count)` for each contiguous run of
  /// block `index` along `dim` of a tensor of shape `fullShape`, block
  /// shape `blockShape`: element offsets into the block and the whole.
  template <typename Copy>
  static void forEachBlockRun(const Shape &fullShape, const Shape &blockShape,
                              int dim, int64_t index, Copy copy) {
    int64_t elements = 1;
    for (int64_t extent : blockShape)
      elements *= extent;
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(dim) + 1; d < fullShape.size(); ++d)
      inner *= fullShape[d];
    int64_t run = blockShape[dim] * inner;
    for (int64_t first = 0; run > 0 && first < elements; first += run)
      copy(first,
           blockElementIndex(fullShape, dim, blockShape[dim], index, first),
           run);
  }


  /// What files hold of a parameter: its full shape when it is sharded.
  static const Shape &fileShape(const ParameterSpec &spec) {
    return spec.sharding ? spec.sharding->fullShape : spec.shape;
  }

  /// The full tensor of sharded parameter `index` from the pieces of every
  /// rank of its group, on rank 0 (the others get an unfilled tensor).
  /// Every rank must call it.
  Tensor gather(size_t index) const {
    const ParameterSpec &spec = program.parameters()[index];
    const Tensor &piece = read(index);
    size_t bytes = piece.sizeBytes();
    std::vector<uint8_t> pieces(bytes * static_cast<size_t>(world->size()));
    world->allGatherBytes(piece.data(), pieces.data(), bytes);
    Tensor full(spec.dtype, spec.sharding->fullShape);
    if (rank != 0)
      return full;
    uint32_t submesh = spec.sharding->submesh;
    int group = layout.groupOf(submesh, rank);
    size_t elementBytes = elementSize(spec.dtype);
    if (spec.sharding->blockSubmesh) {
      // Pieces of blocks: every peer that agrees with this rank outside the
      // two groups holds piece (its index over submesh) of block (its
      // index over the block group).
      const ShardingSpec &sharding = *spec.sharding;
      Shape block = blockShape(sharding);
      int64_t blockElements = 1;
      for (int64_t extent : block)
        blockElements *= extent;
      uint32_t blocks = *sharding.blockSubmesh;
      for (int peer = 0; peer < world->size(); ++peer) {
        if (!layout.agreeOutside(rank, peer, submesh, blocks))
          continue;
        int64_t first = layout.indexInGroup(submesh, peer) * spec.shape[0];
        int64_t index = layout.indexInGroup(blocks, peer);
        const uint8_t *data =
            pieces.data() + static_cast<size_t>(peer) * bytes;
        for (int64_t i = 0; i < spec.shape[0] && first + i < blockElements;
             ++i)
          std::memcpy(full.data() +
                          blockElementIndex(sharding.fullShape, *sharding.dim,
                                            block[*sharding.dim], index,
                                            first + i) *
                              elementBytes,
                      data + i * elementBytes, elementBytes);
      }
      return full;
    }
    if (spec.sharding->dim) {
      for (int peer = 0; peer < world->size(); ++peer) {
        if (layout.groupOf(submesh, peer) != group)
          continue;
        const uint8_t *block =
            pieces.data() + static_cast<size_t>(peer) * bytes;
        forEachBlockRun(
            spec.sharding->fullShape, spec.shape, *spec.sharding->dim,
            layout.indexInGroup(submesh, peer),
            [&](int64_t inBlock, int64_t inWhole, int64_t count) {
              std::memcpy(full.data() + inWhole * elementBytes,
                          block + inBlock * elementBytes,
                          count * elementBytes);
            });
      }
      return full;
    }
    auto total = static_cast<size_t>(full.numElements());
    for (int peer = 0; peer < world->size(); ++peer) {
      if (layout.groupOf(submesh, peer) != group)
        continue;
      // The padding past the full tensor's end is dropped.
      auto first = static_cast<size_t>(layout.indexInGroup(submesh, peer) *
                                       spec.shape[0]);
      if (first >= total)
        continue;
      size_t count =
          std::min(static_cast<size_t>(spec.shape[0]), total - first);
      std::memcpy(full.data() + first * elementBytes,
                  pieces.data() + static_cast<size_t>(peer) * bytes,
                  count * elementBytes);
    }
    return full;
  }

  /// What run() takes for `input`: the global tensor of a split input.
  Shape callerShape(const TensorSpec &input) const {
    Shape shape = input.shape;
    if (input.split)
      shape[0] *= layout.groupSize(*input.split);
    return shape;
  }

  Program program;
  SessionOptions options;
  /// Null for a program without a mesh.
  comm::World *world;
  MeshLayout layout;
  int rank;
  /// options.traceFile, or this rank's variant of it.
  std::string tracePath;
  // Declared before the device, which adds to it, so that it outlives it.
  std::unique_ptr<Trace> trace;
  /// How many events the trace held when writeTrace() last tried to write.
  std::optional<size_t> eventsAtLastWrite;
  // Sized once: devices hold pointers into these tensors, so they are only
  // ever written in place.
  std::vector<Tensor> parameters;
  /// The host threads (options.threads, else defaultCpuThreads()): the cpu
  /// device's kernels run on them, and parameters are initialised on them
  /// on any device. Declared before the device, which holds it.
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Device> device;
  /// The schedule's rate the last run used, and whether it was written.
  std::optional<float> learningRate;
  bool lrWritten = false;
};

namespace {
/// The host memory a Session of `program` allocates before its first run
/// (every parameter and state tensor, and on the CPU each entry's arena)
/// fits in the machine's, checked before any of it is allocated: an
/// artifact may declare any sizes, and zero-filling more than the machine
/// holds would end in the kernel's OOM killer, not an error.
void checkHostMemory(const Program &program, const std::string &device) {
  uint64_t parameters = 0, largest = 0, arenas = 0;
  std::string largestName;
  auto add = [](uint64_t &total, uint64_t bytes) {
    total = total > UINT64_MAX - bytes ? UINT64_MAX : total + bytes;
  };
  for (const ParameterSpec &spec : program.parameters()) {
    uint64_t bytes = byteSize(spec.dtype, spec.shape,
                              concat("parameter '", spec.name, "'"));
    add(parameters, bytes);
    if (bytes > largest)
      largest = bytes, largestName = spec.name;
  }
  if (device == "cpu")
    for (const EntrySpec &entry : program.entries())
      add(arenas, entry.plan.arenaBytes);
  uint64_t total = parameters;
  add(total, arenas);
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0)
    return; // the machine does not say
  uint64_t machine = static_cast<uint64_t>(pages) * pageSize;
  if (total <= machine)
    return;
  auto gb = [](uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3f GB", static_cast<double>(bytes) / 1e9);
    return std::string(text);
  };
  fail("the program needs ", gb(total), " of host memory (parameters and "
       "state ", gb(parameters), ", the largest '", largestName, "' ",
       gb(largest), device == "cpu" ? concat("; entry arenas ", gb(arenas))
                                    : std::string(),
       "), more than this machine's ", gb(machine),
       ": an artifact for a larger machine, or a damaged one; nothing was "
       "allocated");
}
} // namespace

Session::Session(Program program, SessionOptions options)
    : impl_(std::make_unique<Impl>(std::move(program), std::move(options))) {
  checkHostMemory(impl_->program, impl_->options.device);
  for (const ParameterSpec &spec : impl_->program.parameters())
    impl_->parameters.emplace_back(spec.dtype, spec.shape);
  unsigned threads = impl_->options.threads;
  impl_->pool =
      std::make_unique<ThreadPool>(threads ? threads : defaultCpuThreads());
  impl_->device =
      createDevice(impl_->options.device, impl_->program, impl_->parameters,
                   {impl_->options.cudaGraphs, impl_->trace.get(), impl_->world,
                    impl_->pool.get(), impl_->options.kernelObserver});
  initialize(impl_->options.seed, impl_->options.initializeWeights);
}

Session::~Session() = default;
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;

const Program &Session::program() const { return impl_->program; }

int Session::rank() const { return impl_->rank; }

int Session::worldSize() const {
  return impl_->world ? impl_->world->size() : 1;
}

void Session::agree(
    const std::vector<std::pair<std::string, std::string>> &settings) const {
  if (impl_->world)
    checkSameSettings(settings, *impl_->world);
}

void Session::initParameters(uint64_t seed) { initialize(seed, true); }

void Session::initialize(uint64_t seed, bool weights) {
  const std::vector<ParameterSpec> &specs = impl_->program.parameters();
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParameterSpec &spec = specs[i];
    if (spec.initKind == InitKind::Copy || (!weights && !spec.state))
      continue;
    if (spec.sharding && spec.sharding->blockSubmesh) {
      uint32_t blocks = *spec.sharding->blockSubmesh;
      initializeParameterPieceOfBlock(
          impl_->parameters[i], spec, seed, spec.sharding->fullShape,
          *spec.sharding->dim, impl_->layout.groupSize(blocks),
          impl_->layout.indexInGroup(blocks, impl_->rank),
          impl_->pieceStart(spec), impl_->pool.get());
    } else if (spec.sharding && spec.sharding->dim)
      initializeParameterBlock(
          impl_->parameters[i], spec, seed, spec.sharding->fullShape,
          *spec.sharding->dim,
          impl_->layout.indexInGroup(spec.sharding->submesh, impl_->rank),
          impl_->pool.get());
    else if (spec.sharding)
      initializeParameterPiece(
          impl_->parameters[i], spec, seed, impl_->pieceStart(spec),
          numElements(spec.sharding->fullShape, spec.name), impl_->pool.get());
    else
      initializeParameter(impl_->parameters[i], spec, seed, impl_->pool.get());
    impl_->device->parameterWritten(i);
  }
  impl_->refreshCopies();
}

void Session::loadParameters(const std::string &path, bool allowExtra) {
  load(path, allowExtra, /*withState=*/false, nullptr);
}

std::map<std::string, std::string> Session::loadState(const std::string &path) {
  std::map<std::string, std::string> metadata;
  load(path, /*allowExtra=*/false, /*withState=*/true, &metadata);
  return metadata;
}

namespace {
/// `tensor` as a `dtype` tensor of `shape`: a model weight of another
/// floating-point dtype is converted into `storage` (a bf16 checkpoint into
/// an f32 model); anything else must match exactly.
const Tensor &asWeight(const Tensor &tensor, DType dtype, const Shape &shape,
                       bool convert, const std::string &what,
                       Tensor &storage) {
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
    std::string what = concat("'", path, "': tensor '", spec.parts[e],
                              "' (part ", e, " of parameter '", spec.name,
                              "')");
    Tensor converted;
    const Tensor &part = asWeight(it->second, spec.dtype, partShape,
                                  /*convert=*/true, what, converted);
    std::memcpy(stacked.data() + offset, part.data(), part.sizeBytes());
    offset += part.sizeBytes();
  }
  return stacked;
}

/// The slices along dim 0 of `whole`, a parameter held in parts, under
/// the names of its parts (their storage in `owned`).
void appendParts(std::vector<std::pair<std::string, const Tensor *>> &tensors,
                 std::deque<Tensor> &owned, const ParameterSpec &spec,
                 const Tensor &whole) {
  Shape partShape(whole.shape().begin() + 1, whole.shape().end());
  size_t offset = 0;
  for (const std::string &name : spec.parts) {
    Tensor &part = owned.emplace_back(whole.dtype(), partShape);
    std::memcpy(part.data(), whole.data() + offset, part.sizeBytes());
    offset += part.sizeBytes();
    tensors.emplace_back(name, &part);
  }
}
} // namespace

void Session::load(const std::string &path, bool allowExtra, bool withState,
                   std::map<std::string, std::string> *metadata) {
  std::map<std::string, Tensor> tensors =
      metadata ? readSafetensors(path, metadata) : readCheckpoint(path);
  const std::vector<ParameterSpec> &specs = impl_->program.parameters();
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
      stacked[i] = stackParts(tensors, spec, Impl::fileShape(spec), path);
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
    found[i] = &asWeight(*found[i], spec.dtype, Impl::fileShape(spec),
                         /*convert=*/!spec.state, what, converted[i]);
    if (impl_->options.checkFinite)
      checkFinite(*found[i], what);
    if (spec.nonNegative)
      checkNonNegative(*found[i], what);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!found[i])
      continue;
    const Tensor &tensor = *found[i];
    if (specs[i].sharding)
      impl_->write(i, impl_->localPiece(specs[i], tensor).data());
    else
      impl_->write(i, tensor.data());
  }
  // Master weights follow newly loaded weights; a full state brings its own.
  if (!withState)
    impl_->refreshCopies();
}

void Session::saveParameters(const std::string &path,
                             uint64_t maxShardBytes) const {
  save(path, /*withState=*/false, maxShardBytes, {});
}

void Session::saveState(
    const std::string &path,
    const std::map<std::string, std::string> &metadata) const {
  if (isCheckpointDirectory(path))
    fail("cannot save the training state to the directory '", path,
         "': the state goes into one .safetensors file (directories take "
         "model weights in Hugging Face layout)");
  save(path, /*withState=*/true, 0, metadata);
}

void Session::save(const std::string &path, bool withState,
                   uint64_t maxShardBytes,
                   const std::map<std::string, std::string> &metadata) const {
  // What is written, by name: a whole parameter from its own tensor (no
  // copy of a model is made to save it), gathered pieces and experts'
  // parts from `owned`.
  std::vector<std::pair<std::string, const Tensor *>> tensors;
  std::deque<Tensor> owned;
  const std::vector<ParameterSpec> &specs = impl_->program.parameters();
  bool writer = impl_->rank == 0;
  // Every rank gathers the sharded parameters in the same order.
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!withState && specs[i].state)
      continue;
    // Model checkpoints hold stacked experts one tensor per expert, as
    // Hugging Face's do; training-state files hold them whole.
    bool inParts = !withState && !specs[i].parts.empty();
    if (specs[i].sharding) {
      Tensor full = impl_->gather(i);
      if (writer && inParts) {
        appendParts(tensors, owned, specs[i], full);
      } else if (writer) {
        owned.push_back(std::move(full));
        tensors.emplace_back(specs[i].name, &owned.back());
      }
    } else if (writer && inParts) {
      appendParts(tensors, owned, specs[i], impl_->read(i));
    } else if (writer) {
      tensors.emplace_back(specs[i].name, &impl_->read(i));
    }
  }
  if (!writer)
    return;
  if (!withState && isCheckpointDirectory(path)) {
    writeCheckpointDirectory(path, tensors, impl_->program.hfConfig(),
                             maxShardBytes);
    return;
  }
  writeSafetensors(path, tensors, metadata);
}

const Tensor &Session::parameter(std::string_view name) const {
  size_t index;
  impl_->parameterSpec(name, index);
  return impl_->read(index);
}

void Session::setParameter(std::string_view name, const Tensor &value) {
  size_t index;
  const ParameterSpec &spec = impl_->parameterSpec(name, index);
  checkTensorMatches(value, spec.dtype, spec.shape,
                     concat("value for parameter '", name, "'"));
  impl_->write(index, value.data());
  impl_->refreshCopies(index);
}

namespace {
/// Every value of an index input lies in [0, indexBound) or is the ignored
/// label: an id outside the table would read or write outside it.
void checkIndices(const Tensor &tensor, const TensorSpec &input,
                  const std::string &what) {
  int64_t count = tensor.numElements();
  auto valueAt = [&](int64_t i) -> int64_t {
    return tensor.dtype() == DType::I64 ? tensor.dataAs<int64_t>()[i]
                                        : tensor.dataAs<int32_t>()[i];
  };
  for (int64_t i = 0; i < count; ++i) {
    int64_t value = valueAt(i);
    if ((value >= 0 && value < input.indexBound) || value == input.indexIgnore)
      continue;
    // The element's position, outermost dimension first.
    std::vector<int64_t> position(tensor.shape().size());
    int64_t rest = i;
    for (size_t d = position.size(); d-- > 0;) {
      position[d] = rest % tensor.shape()[d];
      rest /= tensor.shape()[d];
    }
    std::string where;
    for (size_t d = 0; d < position.size(); ++d)
      where += (d ? ", " : "") + std::to_string(position[d]);
    std::string ignore =
        input.indexIgnore
            ? concat(" and not the ignored label ", *input.indexIgnore)
            : "";
    fail(what, " holds ", value, " at [", where, "], outside [0, ",
         input.indexBound, ")", ignore, " (the ", input.indexUse,
         !input.indexIgnore && input.indexUse.find("cross-entropy") !=
                 std::string::npos
             ? "; this loss ignores no label: megc gen/import "
               "--ignore-index N makes it skip N"
             : "",
         ")");
  }
}
} // namespace

std::map<std::string, Tensor>
Session::run(std::string_view entryName,
             const std::map<std::string, Tensor> &inputs) {
  std::map<std::string, Tensor> results;
  run(entryName, inputs, results);
  return results;
}

void Session::run(std::string_view entryName,
                  const std::map<std::string, Tensor> &inputs,
                  std::map<std::string, Tensor> &results) {
  // Earlier results lend their storage; `results` stays empty until this
  // run succeeds.
  std::map<std::string, Tensor> previous;
  previous.swap(results);
  const Program &program = impl_->program;
  const EntrySpec *spec = program.findEntry(entryName);
  if (!spec)
    fail("unknown entry '", entryName,
         "'; the program has entries: ", joinSpecNames(program.entries()));
  std::string where = concat("entry '", spec->name, "'");
  for (const TensorSpec &input : spec->inputs) {
    Shape shape = impl_->callerShape(input);
    auto found = inputs.find(input.name);
    if (found == inputs.end())
      fail(where, ": missing input '", input.name, "' (expected ",
           formatType(input.dtype, shape), ")");
    std::string what = concat(where, ": input '", input.name, "'");
    if (input.split && found->second.shape() != shape)
      fail(what, " is split over submesh ", *input.split, " (",
           impl_->layout.groupSize(*input.split),
           " ranks): expected the global shape ", formatShape(shape), " (",
           input.shape[0], " rows per rank), found ",
           formatShape(found->second.shape()));
    checkTensorMatches(found->second, input.dtype, shape, what);
    if (input.indexBound > 0)
      checkIndices(found->second, input, what);
  }
  for (const auto &[name, tensor] : inputs) {
    bool known = false;
    for (const TensorSpec &input : spec->inputs)
      known |= input.name == name;
    if (!known)
      fail(where, ": unexpected input '", name,
           "'; expected inputs: ", joinSpecNames(spec->inputs));
  }

  // This rank's rows of split inputs; reserved, so that pointers stay valid.
  std::vector<Tensor> rows;
  rows.reserve(spec->inputs.size());
  std::vector<const Tensor *> ordered;
  for (const TensorSpec &input : spec->inputs) {
    const Tensor &given = inputs.at(input.name);
    if (!input.split) {
      ordered.push_back(&given);
      continue;
    }
    int64_t first =
        impl_->layout.indexInGroup(*input.split, impl_->rank) * input.shape[0];
    ordered.push_back(&rows.emplace_back(pieceOf(given, first, input.shape)));
  }
  size_t entryIndex = spec - program.entries().data();
  impl_->applyLrSchedule(entryIndex);
  // The storage of earlier results, where the device can write into it.
  std::vector<Tensor> outputs(spec->outputs.size());
  for (size_t i = 0; i < spec->outputs.size(); ++i)
    if (auto found = previous.find(spec->outputs[i].name);
        found != previous.end())
      outputs[i] = std::move(found->second);
  impl_->device->run(entryIndex, ordered, outputs);
  for (size_t i = 0; i < spec->outputs.size(); ++i)
    results.emplace(spec->outputs[i].name, std::move(outputs[i]));
}

std::optional<double> Session::learningRate() const {
  return impl_->learningRate;
}

void Session::writeTrace() {
  if (!impl_->trace)
    fail("writeTrace: tracing is off (set SessionOptions::traceFile)");
  impl_->eventsAtLastWrite = impl_->trace->numEvents();
  impl_->trace->write(impl_->tracePath);
}

void Session::clearTrace() {
  if (!impl_->trace)
    fail("clearTrace: tracing is off (set SessionOptions::traceFile)");
  impl_->trace->clear();
  impl_->eventsAtLastWrite.reset();
}

} // namespace megrt
