// A session: connects the world, creates the device, checks and runs
// entries, applies the learning-rate schedule and keeps the trace. Its
// parameters are a ParameterStore, their files CheckpointIO's.
#include "megrt/Session.h"

#include "AsyncSave.h"
#include "CheckpointIO.h"
#include "Device.h"
#include "DistributedCheckpoint.h"
#include "Fail.h"
#include "FbTypes.h"
#include "HfCheckpoint.h"
#include "MeshLayout.h"
#include "ParameterStore.h"
#include "RankAgreement.h"
#include "TensorChecks.h"
#include "Trace.h"
#include "comm/Communicator.h"
#include "comm/LaunchEnvironment.h"
#include "cpu/ThreadPool.h"
#include "megrt/Checkpoint.h"
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
    // A pipeline's rank runs its own stage's program.
    this->program.selectPipelineRank([this](uint32_t submesh) {
      return layout.indexInGroup(submesh, rank);
    });
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

  /// Writes the schedule's learning rate for the coming update into the lr
  /// parameter, before an entry that reads it runs.
  void applyLrSchedule(size_t entry) {
    const std::optional<LrScheduleSpec> &schedule = program.lrSchedule();
    if (!schedule || !readsParameter(entry, schedule->lrParameter))
      return;
    float done = *store->read(schedule->stepParameter).dataAs<float>();
    auto rate = static_cast<float>(
        schedule->learningRateAt(static_cast<int64_t>(done)));
    if (*store->tensors()[schedule->lrParameter].dataAs<float>() != rate ||
        !lrWritten) {
      store->write(schedule->lrParameter, &rate);
      lrWritten = true;
    }
    learningRate = rate;
  }

  /// Completes the save in flight, if any (Session::finishSave).
  std::string finishPendingSave() {
    if (!pendingSave)
      return "";
    // Whatever happens, the save is no longer in flight.
    std::unique_ptr<AsyncSave> save = std::move(pendingSave);
    save->finish();
    saveStaging = save->takeStaging();
    return save->path();
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
  /// The parameters, which the device holds pointers into: declared
  /// before it, so that they outlive it.
  std::unique_ptr<ParameterStore> store;
  /// The host threads (options.threads, else defaultCpuThreads()): the cpu
  /// device's kernels run on them, and parameters are initialised on them
  /// on any device. Declared before the device, which holds it.
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Device> device;
  /// The save in flight (startSaveState): it reads the store, so it is
  /// declared after it and finishes before it goes.
  std::unique_ptr<AsyncSave> pendingSave;
  /// The area saves in flight copy the state into, kept between them.
  std::vector<uint8_t> saveStaging;
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
void checkHostMemory(const Program &program, const std::string &device,
                     const MeshLayout &layout, int rank) {
  uint64_t parameters = 0, largest = 0, arenas = 0;
  std::string largestName;
  auto add = [](uint64_t &total, uint64_t bytes) {
    total = total > UINT64_MAX - bytes ? UINT64_MAX : total + bytes;
  };
  for (const ParameterSpec &spec : program.parameters()) {
    // A pipeline rank holds no other stage's parameters.
    if (spec.pipelineOwner >= 0 &&
        layout.indexInGroup(static_cast<size_t>(spec.pipelineSubmesh), rank) !=
            spec.pipelineOwner)
      continue;
    uint64_t bytes = byteSize(spec.dtype, spec.shape,
                              concat("parameter '", spec.name, "'"));
    add(parameters, bytes);
    if (bytes > largest)
      largest = bytes, largestName = spec.name;
  }
  if (device == "cpu")
    for (const EntrySpec &entry : program.entries())
      if (entry.stageSubmesh < 0 || program.findEntry(entry.name) == &entry)
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
  checkHostMemory(impl_->program, impl_->options.device, impl_->layout,
                  impl_->rank);
  impl_->store = std::make_unique<ParameterStore>(impl_->program, impl_->layout,
                                                  impl_->rank, impl_->world);
  unsigned threads = impl_->options.threads;
  impl_->pool =
      std::make_unique<ThreadPool>(threads ? threads : defaultCpuThreads());
  impl_->device = createDevice(
      impl_->options.device, impl_->program, impl_->store->tensors(),
      {impl_->options.cudaGraphs, impl_->trace.get(), impl_->world,
       impl_->pool.get(), impl_->options.kernelObserver});
  impl_->store->attach(impl_->device.get());
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
  impl_->store->initialize(seed, weights, impl_->pool.get());
}

void Session::loadParameters(const std::string &path, bool allowExtra) {
  load(path, allowExtra, /*withState=*/false, nullptr);
}

std::map<std::string, std::string> Session::loadState(const std::string &path) {
  std::map<std::string, std::string> metadata;
  load(path, /*allowExtra=*/false, /*withState=*/true, &metadata);
  return metadata;
}

void Session::load(const std::string &path, bool allowExtra, bool withState,
                   std::map<std::string, std::string> *metadata) {
  // A training state in a directory is a distributed checkpoint (one
  // without its record is refused as incomplete); so is a weights
  // directory with a commit record (else Hugging Face layout).
  std::error_code error;
  if (isDistributedCheckpoint(path) ||
      (withState && std::filesystem::is_directory(path, error)))
    loadDistributedCheckpoint(*impl_->store, impl_->program, path, allowExtra,
                              withState, impl_->options.checkFinite, metadata);
  else
    loadCheckpointFile(*impl_->store, impl_->program, path, allowExtra,
                       withState, impl_->options.checkFinite, metadata);
}

void Session::saveParameters(const std::string &path,
                             uint64_t maxShardBytes) const {
  impl_->finishPendingSave();
  save(path, /*withState=*/false, maxShardBytes, {});
}

void Session::saveState(
    const std::string &path,
    const std::map<std::string, std::string> &metadata) const {
  impl_->finishPendingSave();
  if (isCheckpointDirectory(path))
    saveDistributedCheckpoint(*impl_->store, impl_->program, path,
                              /*withState=*/true, metadata);
  else
    save(path, /*withState=*/true, 0, metadata);
}

void Session::startSaveState(
    const std::string &path,
    const std::map<std::string, std::string> &metadata) {
  impl_->finishPendingSave();
  bool distributed = isCheckpointDirectory(path);
  if (!distributed && impl_->world)
    fail("cannot save the training state to '", path,
         "' while training goes on: under a mesh an asynchronous save writes "
         "a distributed checkpoint (a directory, or a path ending in '/')");
  impl_->pendingSave = std::make_unique<AsyncSave>(
      *impl_->store, impl_->program, path, distributed, metadata,
      std::move(impl_->saveStaging));
}

std::string Session::finishSave() { return impl_->finishPendingSave(); }

void Session::checkSave() const {
  if (impl_->pendingSave)
    impl_->pendingSave->check();
}

void Session::save(const std::string &path, bool withState,
                   uint64_t maxShardBytes,
                   const std::map<std::string, std::string> &metadata) const {
  saveCheckpointFile(*impl_->store, impl_->program, path, withState,
                     maxShardBytes, metadata);
}

const Tensor &Session::parameter(std::string_view name) const {
  size_t index;
  const ParameterSpec &spec = impl_->store->spec(name, index);
  if (!impl_->store->holds(index))
    fail("parameter '", name, "' belongs to pipeline rank ", spec.pipelineOwner,
         "'s stage; this rank (", impl_->rank,
         ") does not hold it (save a checkpoint to see every stage's)");
  return impl_->store->read(index);
}

void Session::setParameter(std::string_view name, const Tensor &value) {
  size_t index;
  const ParameterSpec &spec = impl_->store->spec(name, index);
  checkTensorMatches(value, spec.dtype, spec.shape,
                     concat("value for parameter '", name, "'"));
  impl_->store->write(index, value.data());
  impl_->store->refreshCopies(index);
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
