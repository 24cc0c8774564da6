//===- megc-run.cpp - runs entry points of a megc artifact -------------===//
//
// Loads an artifact, initialises or loads the parameters, runs one entry
// for a number of steps with inputs from .npy files and writes each output
// as DIR/<output name>.npy. Prints each step's time and, for benchmarks,
// their median. Depends on the runtime only.
//
// A program with a mesh runs unchanged under `mpirun -n RANKS`: every rank
// reads the same (global) inputs and checkpoints; rank 0 alone prints the
// steps and writes outputs and checkpoints; a rank that fails prints its
// error and exits at once, which ends the job.
//
// Over 600 lines: a tool's whole command line (flags, inputs, the step
// loop, checkpoints); the work is the runtime's, this file only drives it.
//
//===----------------------------------------------------------------------===//

#include "megrt/Checkpoint.h"
#include "megrt/Error.h"
#include "megrt/FileIdentity.h"
#include "megrt/Npy.h"
#include "megrt/Safetensors.h"
#include "megrt/Session.h"
#include "megrt/TokenDataset.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

/// The training state's metadata key for the --data stream position.
const std::string kDataPositionKey = "megc.data_position";
/// How the checkpointed run read its data: "file order", or "shuffled
/// with seed N" (--data-seed); a resumed run reads it the same way.
const std::string kDataOrderKey = "megc.data_order";

std::string dataOrderText(std::optional<uint64_t> seed) {
  return seed ? "shuffled with seed " + std::to_string(*seed) : "file order";
}
/// Parameters and state of at least this many bytes take seconds to set up
/// before the first step; megc-run says what it is doing meanwhile.
constexpr uint64_t kAnnounceBytes = 1'000'000'000;

const char *kUsage =
    "usage: megc-run MODEL.megc --entry NAME [--device cpu|cuda[:N]]\n"
    "                [--params init[:SEED]|FILE.safetensors|HF-DIR]\n"
    "                [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
    "                [--steps N] [--save-params FILE.safetensors|HF-DIR/]\n"
    "                [--max-shard-size SIZE]\n"
    "                [--save-state FILE.safetensors] [--load-state FILE]\n"
    "                [--allow-extra-params] [--warmup N] [--no-cuda-graphs]\n"
    "                [--trace FILE.json] [--comm-timeout SECONDS]\n"
    "                [--threads N]\n"
    "                [--data FILE|PREFIX [--data-dtype uint16|uint32|int32]\n"
    "                 [--data-seed N]]\n"
    "                [--eval-data FILE [--eval-every N] [--eval-batches K]]\n"
    "                [--metrics FILE.jsonl] [--log-every N]\n"
    "                [--save-every N --save-dir DIR [--keep K] [--async-save]\n"
    "                 [--on-save-error stop|warn]]\n"
    "                [--resume DIR]\n"
    "                [--no-check-finite] [--skip-nonfinite]\n";

struct Options {
  std::string model, entry, device = "cpu", params = "init", outputDir;
  std::string saveParams, saveState, loadState, trace;
  /// Token files: --data feeds input_ids and labels of every step, in
  /// order or shuffled by dataSeed; --eval-data the loss entry every
  /// evalEvery steps, evalBatches batches from its start.
  std::string data, evalData;
  std::optional<std::string> dataDType;
  std::optional<uint64_t> dataSeed;
  int64_t evalEvery = 0, evalBatches = 1;
  /// One JSON object per step (rank 0); a progress line every logEvery
  /// steps (and the last).
  std::string metrics;
  int64_t logEvery = 1;
  /// Checkpoints: the training state every saveEvery steps into
  /// saveDir/step-NNNNNNNN.safetensors (one rank) or the distributed
  /// checkpoint saveDir/step-NNNNNNNN/ (several), the newest `keep`
  /// complete ones kept (0: all); --resume DIR continues from the newest
  /// complete one there (of either kind, saved on any mesh), up to --steps.
  std::string saveDir, resume;
  int64_t saveEvery = 0, keep = 0;
  /// --async-save: each checkpoint is copied to host memory at its step
  /// and written while the next steps run.
  bool asyncSave = false;
  /// --on-save-error warn: a checkpoint that cannot be written is a
  /// warning and the run goes on (default: stop).
  bool warnOnSaveError = false;
  std::map<std::string, std::string> inputs;
  int64_t steps = 1;
  int64_t warmup = 0;
  /// Shards of a --save-params directory (transformers' default, 50 GB).
  uint64_t maxShardBytes = 50'000'000'000;
  double commTimeoutSeconds = 300;
  bool allowExtraParams = false;
  bool checkFinite = true;
  /// A step whose loss or gradient norm is non-finite (train_step skips its
  /// update then) is counted and the run goes on, instead of stopping.
  bool skipNonfinite = false;
  bool cudaGraphs = true;
  /// 0: MEGRT_NUM_THREADS, else every core.
  unsigned threads = 0;
};

/// Parses a decimal count that fits in 64 bits; false otherwise.
bool parseCount(const std::string &text, uint64_t &value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  value = std::strtoull(text.c_str(), nullptr, 10);
  return errno != ERANGE;
}

[[noreturn]] void usageError(const std::string &message) {
  std::cerr << "megc-run: error: " << message << "\n" << kUsage;
  std::exit(2);
}

/// A size as transformers writes max_shard_size: bytes, or a count with
/// KB, MB or GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
bool parseSize(const std::string &text, uint64_t &bytes) {
  static const std::pair<const char *, uint64_t> kUnits[] = {
      {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
      {"KB", 1000},        {"MB", 1000000},     {"GB", 1000000000}};
  std::string digits = text;
  uint64_t unit = 1;
  for (const auto &[suffix, scale] : kUnits) {
    std::string name(suffix);
    if (text.size() > name.size() &&
        text.compare(text.size() - name.size(), name.size(), name) == 0) {
      digits = text.substr(0, text.size() - name.size());
      unit = scale;
      break;
    }
  }
  uint64_t count = 0;
  if (!parseCount(digits, count) || count == 0 || count > UINT64_MAX / unit)
    return false;
  bytes = count * unit;
  return true;
}

Options parse(int argc, char **argv) {
  Options options;
  auto value = [&](int &i) -> std::string {
    if (i + 1 >= argc)
      usageError(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--entry") {
      options.entry = value(i);
    } else if (arg == "--device") {
      options.device = value(i);
    } else if (arg == "--params") {
      options.params = value(i);
    } else if (arg == "--output-dir") {
      options.outputDir = value(i);
    } else if (arg == "--save-params") {
      options.saveParams = value(i);
    } else if (arg == "--max-shard-size") {
      std::string text = value(i);
      if (!parseSize(text, options.maxShardBytes))
        usageError("--max-shard-size expects a positive size such as "
                   "5GB, 500MB or 1048576, got '" +
                   text + "'");
    } else if (arg == "--data") {
      options.data = value(i);
    } else if (arg == "--eval-data") {
      options.evalData = value(i);
    } else if (arg == "--data-dtype") {
      std::string text = value(i);
      if (text != "uint16" && text != "uint32" && text != "int32")
        usageError("--data-dtype expects uint16, uint32 or int32, got '" +
                   text + "'");
      options.dataDType = text;
    } else if (arg == "--data-seed") {
      std::string text = value(i);
      uint64_t seed = 0;
      if (!parseCount(text, seed))
        usageError("--data-seed expects a non-negative integer, got '" + text +
                   "'");
      options.dataSeed = seed;
    } else if (arg == "--save-dir") {
      options.saveDir = value(i);
    } else if (arg == "--on-save-error") {
      std::string mode = value(i);
      if (mode != "stop" && mode != "warn")
        usageError("--on-save-error takes stop or warn, not '" + mode + "'");
      options.warnOnSaveError = mode == "warn";
    } else if (arg == "--async-save") {
      options.asyncSave = true;
    } else if (arg == "--resume") {
      options.resume = value(i);
    } else if (arg == "--save-every" || arg == "--keep") {
      std::string text = value(i);
      uint64_t count = 0;
      if (!parseCount(text, count) || count < 1 || count > (1ull << 40))
        usageError(arg + " expects a positive integer, got '" + text + "'");
      (arg == "--save-every" ? options.saveEvery : options.keep) =
          static_cast<int64_t>(count);
    } else if (arg == "--metrics") {
      options.metrics = value(i);
    } else if (arg == "--log-every") {
      std::string text = value(i);
      uint64_t count = 0;
      if (!parseCount(text, count) || count < 1 || count > (1ull << 40))
        usageError("--log-every expects a positive integer, got '" + text +
                   "'");
      options.logEvery = static_cast<int64_t>(count);
    } else if (arg == "--eval-every" || arg == "--eval-batches") {
      std::string text = value(i);
      uint64_t count = 0;
      if (!parseCount(text, count) || count < 1 || count > (1ull << 40))
        usageError(arg + " expects a positive integer, got '" + text + "'");
      (arg == "--eval-every" ? options.evalEvery : options.evalBatches) =
          static_cast<int64_t>(count);
    } else if (arg == "--save-state") {
      options.saveState = value(i);
    } else if (arg == "--load-state") {
      options.loadState = value(i);
    } else if (arg == "--steps") {
      std::string text = value(i);
      uint64_t steps = 0;
      if (!parseCount(text, steps) || steps < 1 || steps > (1ull << 40))
        usageError("--steps expects a positive integer, got '" + text + "'");
      options.steps = static_cast<int64_t>(steps);
    } else if (arg == "--warmup") {
      std::string text = value(i);
      uint64_t warmup = 0;
      if (!parseCount(text, warmup) || warmup > (1ull << 40))
        usageError("--warmup expects a non-negative integer, got '" + text +
                   "'");
      options.warmup = static_cast<int64_t>(warmup);
    } else if (arg == "--no-check-finite") {
      options.checkFinite = false;
    } else if (arg == "--skip-nonfinite") {
      options.skipNonfinite = true;
    } else if (arg == "--allow-extra-params") {
      options.allowExtraParams = true;
    } else if (arg == "--no-cuda-graphs") {
      options.cudaGraphs = false;
    } else if (arg == "--threads") {
      std::string text = value(i);
      uint64_t threads = 0;
      if (!parseCount(text, threads) || threads < 1 || threads > 4096)
        usageError("--threads expects a number of threads from 1 to 4096, "
                   "got '" +
                   text + "'");
      options.threads = static_cast<unsigned>(threads);
    } else if (arg == "--trace") {
      options.trace = value(i);
    } else if (arg == "--comm-timeout") {
      std::string text = value(i);
      char *end = nullptr;
      double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(seconds) ||
          seconds <= 0)
        usageError("--comm-timeout expects a positive number of seconds, "
                   "got '" +
                   text + "'");
      options.commTimeoutSeconds = seconds;
    } else if (arg == "--input") {
      std::string text = value(i);
      size_t equals = text.find('=');
      if (equals == std::string::npos || equals == 0)
        usageError("--input expects NAME=FILE.npy, got '" + text + "'");
      std::string name = text.substr(0, equals);
      auto [given, added] =
          options.inputs.emplace(name, text.substr(equals + 1));
      if (!added)
        usageError("--input " + name + " is given twice ('" + given->second +
                   "' and '" + text.substr(equals + 1) + "')");
    } else if (!arg.empty() && arg[0] == '-') {
      usageError("unknown option '" + arg + "'");
    } else if (options.model.empty()) {
      options.model = arg;
    } else {
      usageError("unexpected argument '" + arg + "'");
    }
  }
  if (options.model.empty())
    usageError("no artifact given");
  if (options.entry.empty())
    usageError("--entry is required");
  if (options.data.empty() &&
      (options.dataSeed || !options.evalData.empty()))
    usageError(std::string(options.dataSeed ? "--data-seed" : "--eval-data") +
               " needs --data");
  if (!options.data.empty() &&
      (options.inputs.count("input_ids") || options.inputs.count("labels")))
    usageError("--data gives input_ids and labels; do not pass them with "
               "--input");
  if (options.evalData.empty() && options.evalEvery)
    usageError("--eval-every needs --eval-data");
  if (options.saveEvery && options.saveDir.empty())
    usageError("--save-every needs --save-dir");
  if (!options.saveDir.empty() && !options.saveEvery)
    usageError("--save-dir needs --save-every");
  if (options.keep && !options.saveEvery)
    usageError("--keep needs --save-every");
  if (options.asyncSave && !options.saveEvery)
    usageError("--async-save needs --save-every");
  if (options.warnOnSaveError && !options.saveEvery)
    usageError("--on-save-error needs --save-every");
  if (!options.resume.empty() && !options.loadState.empty())
    usageError("--resume and --load-state both load a training state; give "
               "one");
  return options;
}

/// The checkpoint file of step `step` in `dir`.
/// "N tokens (uint16; an indexed dataset of S sequences, D documents),
/// checked against the vocabulary V in T s (R GB/s)".
std::string describeDataset(const megrt::TokenDataset &data, uint64_t vocab) {
  std::ostringstream os;
  os << data.numTokens() << " tokens (" << megrt::tokenDTypeName(data.dtype());
  if (data.indexed())
    os << "; indexed: " << data.numSequences() << " sequences, "
       << data.numDocuments() << " documents in " << data.dataPath();
  os << "), checked against ";
  if (vocab)
    os << "the vocabulary " << vocab;
  else
    os << "int32 ids";
  double seconds = data.scanSeconds();
  os << std::fixed << std::setprecision(2) << " in " << seconds << " s";
  double bytes = static_cast<double>(data.numTokens()) *
                 static_cast<double>(megrt::tokenDTypeBytes(data.dtype()));
  if (seconds > 0 && bytes >= 1e8)
    os << " (" << bytes / seconds / 1e9 << " GB/s)";
  return os.str();
}

/// What the ranks of a run must agree on (Session::agree): every option
/// that changes what a rank computes or which collectives it runs, files
/// by their content's identity (paths may differ between hosts).
std::vector<std::pair<std::string, std::string>>
runSettings(const Options &options, uint64_t seed, bool init,
            const std::string &statePath, int64_t firstStep) {
  auto file = [](const std::string &path) {
    if (path.empty())
      return std::string("none");
    // A distributed checkpoint by its record, which names every shard.
    if (megrt::isDistributedCheckpoint(path))
      return megrt::fileIdentity(
          (std::filesystem::path(path) / megrt::kCommitRecordName).string());
    return megrt::fileIdentity(path);
  };
  auto flag = [](bool on) { return std::string(on ? "yes" : "no"); };
  std::string inputs;
  for (const auto &[name, path] : options.inputs)
    inputs += (inputs.empty() ? "" : "; ") + name + ": " + file(path);
  std::string device = options.device.substr(0, options.device.find(':'));
  return {
      {"--entry", options.entry},
      {"--device", device},
      {"--steps", std::to_string(options.steps)},
      {"--warmup", std::to_string(options.warmup)},
      {"--params",
       init ? "init:" + std::to_string(seed) : file(options.params)},
      {"the training state loaded (--load-state, --resume)", file(statePath)},
      {"the first step (--resume)", std::to_string(firstStep)},
      {"--input", inputs.empty() ? "none" : inputs},
      {"--data", file(options.data)},
      {"--data-dtype", options.dataDType.value_or("default")},
      {"--data-seed",
       options.dataSeed ? std::to_string(*options.dataSeed) : "none"},
      {"--eval-data", file(options.evalData)},
      {"--eval-every", std::to_string(options.evalEvery)},
      {"--eval-batches", std::to_string(options.evalBatches)},
      {"--save-every", std::to_string(options.saveEvery)},
      {"--async-save", flag(options.asyncSave)},
      {"--on-save-error", options.warnOnSaveError ? "warn" : "stop"},
      {"--save-params (given)", flag(!options.saveParams.empty())},
      {"--save-state (given)", flag(!options.saveState.empty())},
      {"--no-check-finite", flag(!options.checkFinite)},
      {"--skip-nonfinite", flag(options.skipNonfinite)},
      {"--no-cuda-graphs", flag(!options.cudaGraphs)},
  };
}

/// A one-line rendering of a scalar output, or empty for larger tensors;
/// `digits` significant digits (9 round-trip an f32).
std::string scalarText(const megrt::Tensor &tensor, int digits = 6) {
  if (tensor.numElements() != 1 || tensor.dtype() != megrt::DType::F32)
    return "";
  float value = *tensor.dataAs<float>();
  if (!std::isfinite(value))
    return value != value ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  char text[64];
  std::snprintf(text, sizeof(text), "%.*g", digits, value);
  return text;
}

/// The middle value, or the mean of the two middle values.
double median(std::vector<double> values) {
  size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  double upper = values[middle];
  if (values.size() % 2 != 0)
    return upper;
  double lower = *std::max_element(values.begin(), values.begin() + middle);
  return (lower + upper) / 2;
}

int run(const Options &options, const megrt::LaunchedRank &launched) {
  megrt::SessionOptions sessionOptions;
  sessionOptions.device = options.device;
  sessionOptions.cudaGraphs = options.cudaGraphs;
  sessionOptions.traceFile = options.trace;
  sessionOptions.commTimeoutSeconds = options.commTimeoutSeconds;
  sessionOptions.threads = options.threads;
  sessionOptions.checkFinite = options.checkFinite;
  bool init = options.params == "init" || options.params.rfind("init:", 0) == 0;
  // Weights read from a file are not initialised first.
  sessionOptions.initializeWeights = init;
  if (options.params.rfind("init:", 0) == 0) {
    std::string seed = options.params.substr(5);
    if (!parseCount(seed, sessionOptions.seed))
      usageError("--params init:SEED expects a non-negative integer seed, "
                 "got '" +
                 seed + "'");
  }
  megrt::Program program = megrt::Program::load(options.model);
  // Copies of a single-rank program would only overwrite each other's files.
  if (!program.mesh() && launched.size > 1)
    throw megrt::Error("'" + options.model +
                       "' is a single-rank program (it has no mesh), but the "
                       "launcher started " +
                       std::to_string(launched.size) +
                       " ranks; run it without mpirun");
  uint64_t parameterBytes = 0;
  for (const megrt::ParameterSpec &param : program.parameters())
    parameterBytes += megrt::byteSize(param.dtype, param.shape, param.name);
  auto mb = [](uint64_t bytes) { return static_cast<double>(bytes) / 1e6; };
  bool announce = launched.rank == 0 && parameterBytes >= kAnnounceBytes;
  auto setupStart = std::chrono::steady_clock::now();
  if (announce)
    std::cout << "megc-run: "
              << (init ? "initialising"
                       : "loading '" + options.params + "' into")
              << " " << mb(parameterBytes) << " MB of parameters and state"
              << std::endl;
  megrt::Session session(program, sessionOptions);
  // Every rank runs the same calls (the Session communicates); rank 0
  // alone reports and writes files.
  bool lead = session.rank() == 0;
  if (lead && session.worldSize() > 1)
    std::cout << "megc-run: " << session.worldSize() << " ranks, mesh "
              << program.describeMesh() << std::endl;
  std::string statePath = options.loadState;
  int64_t firstStep = 1;
  if (!options.resume.empty()) {
    megrt::CheckpointDirectory resume(options.resume);
    if (resume.list().empty())
      throw megrt::Error("--resume: '" + options.resume +
                         "' holds no checkpoint (step-NNNNNNNN.safetensors "
                         "or step-NNNNNNNN/)");
    // The newest complete one: a file cut short (by a crash during a save
    // of an older megc, or damaged since) or a distributed checkpoint
    // without its record is skipped, and said so.
    std::vector<std::string> skipped;
    std::optional<megrt::CheckpointDirectory::Entry> newest =
        resume.newestComplete(&skipped);
    if (lead)
      for (const std::string &why : skipped)
        std::cerr << "megc-run: warning: --resume skips an incomplete "
                     "checkpoint: "
                  << why << std::endl;
    if (!newest)
      throw megrt::Error("--resume: no checkpoint in '" + options.resume +
                         "' is whole (each was skipped above)");
    statePath = newest->path;
    firstStep = newest->step + 1;
  }
  // The ranks agree on what they run before any of it: a difference stops
  // every rank, naming the option.
  if (session.worldSize() > 1)
    session.agree(runSettings(options, sessionOptions.seed, init, statePath,
                              firstStep));
  if (!init)
    session.loadParameters(options.params, options.allowExtraParams);
  if (announce)
    std::cout << "megc-run: parameters ready in "
              << std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - setupStart)
                     .count()
              << " s" << std::endl;
  std::map<std::string, std::string> resumed;
  if (!options.resume.empty() && lead)
    std::cout << "megc-run: resuming from " << statePath << std::endl;
  if (!statePath.empty()) {
    auto loadStart = std::chrono::steady_clock::now();
    resumed = session.loadState(statePath);
    if (lead)
      std::cout << "megc-run: training state loaded in " << std::fixed
                << std::setprecision(3)
                << std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - loadStart)
                       .count()
                << " s" << std::defaultfloat << std::endl;
  }

  std::map<std::string, megrt::Tensor> inputs;
  for (const auto &[name, path] : options.inputs)
    inputs[name] = megrt::readNpy(path);

  // Token data: every rank reads the global batch; the Session hands each
  // data-parallel rank its rows.
  std::unique_ptr<megrt::TokenDataset> data, evalData;
  std::optional<uint64_t> dataSeed;
  int64_t rows = 0, evalRows = 0;
  megrt::TokenDatasetOptions dataOptions;
  if (options.dataDType)
    dataOptions.dtype = megrt::parseTokenDType(*options.dataDType);
  dataOptions.vocab = megrt::vocabSizeOf(program).value_or(0);
  if (!options.data.empty()) {
    auto [batchRows, seq] =
        megrt::tokenBatchShape(program, options.entry, "--data");
    rows = batchRows;
    megrt::TokenDatasetOptions train = dataOptions;
    train.shuffleSeed = options.dataSeed;
    // A resumed run reads the data in the checkpoint's order: its seed
    // unless --data-seed is given, and then it must be the same.
    if (auto order = resumed.find(kDataOrderKey); order != resumed.end()) {
      std::optional<uint64_t> recorded;
      const std::string prefix = "shuffled with seed ";
      uint64_t seed = 0;
      if (order->second.rfind(prefix, 0) == 0 &&
          parseCount(order->second.substr(prefix.size()), seed))
        recorded = seed;
      else if (order->second != "file order")
        throw megrt::Error("'" + statePath + "': metadata " + kDataOrderKey +
                           " = '" + order->second +
                           "' is neither 'file order' nor 'shuffled with "
                           "seed N'");
      if (options.dataSeed && options.dataSeed != recorded)
        throw megrt::Error("--data-seed " + std::to_string(*options.dataSeed) +
                           ": the checkpoint '" + statePath +
                           "' read its data in " + order->second +
                           "; a resumed run reads it the same way (leave "
                           "--data-seed out to take the checkpoint's)");
      if (!options.dataSeed && recorded && lead)
        std::cout << "megc-run: --data-seed " << *recorded
                  << " from the checkpoint" << std::endl;
      train.shuffleSeed = recorded;
    }
    dataSeed = train.shuffleSeed;
    data = std::make_unique<megrt::TokenDataset>(options.data, seq, train);
    if (auto position = resumed.find(kDataPositionKey);
        position != resumed.end()) {
      uint64_t value = 0;
      if (!parseCount(position->second, value))
        throw megrt::Error("'" + statePath + "': metadata " +
                           kDataPositionKey + " = '" + position->second +
                           "' is not a count");
      data->setPosition(value);
    }
    if (lead)
      std::cout << "megc-run: --data " << options.data << ": "
                << describeDataset(*data, dataOptions.vocab) << ", "
                << data->numWindows() << " windows of " << seq << " + 1, "
                << rows << " a step, from window " << data->position()
                << std::endl;
  }
  if (!options.evalData.empty()) {
    auto [batchRows, seq] =
        megrt::tokenBatchShape(program, "loss", "--eval-data");
    evalRows = batchRows;
    evalData =
        std::make_unique<megrt::TokenDataset>(options.evalData, seq,
                                              dataOptions);
    if (lead)
      std::cout << "megc-run: --eval-data " << options.evalData << ": "
                << describeDataset(*evalData, dataOptions.vocab) << std::endl;
  }
  auto evaluate = [&](int64_t step) {
    double sum = 0;
    for (int64_t k = 0; k < options.evalBatches; ++k) {
      std::map<std::string, megrt::Tensor> batch;
      evalData->windows(static_cast<uint64_t>(k * evalRows), evalRows,
                        batch["input_ids"], batch["labels"]);
      sum += *session.run("loss", batch).at("loss").dataAs<float>();
    }
    if (lead)
      std::cout << "eval step " << step << " loss "
                << sum / static_cast<double>(options.evalBatches) << " ("
                << options.evalBatches << " batches)" << std::endl;
  };

  std::map<std::string, megrt::Tensor> outputs;
  // Warm-up steps take the first run's costs (allocation, graph capture)
  // out of the timed ones.
  if (data && options.warmup > 0)
    throw megrt::Error("--warmup repeats steps, which would consume --data "
                       "windows; use it without --data");
  // What the runs allocate on top of what loading did (the entry's arena
  // and storage are made on its first run).
  megrt::resetPeakHostMemory();
  for (int64_t step = 0; step < options.warmup; ++step)
    session.run(options.entry, inputs, outputs);
  // The trace, too, holds the timed steps only.
  if (options.warmup > 0 && !options.trace.empty())
    session.clearTrace();
  std::unique_ptr<std::ofstream> metrics;
  if (lead && !options.metrics.empty()) {
    metrics = std::make_unique<std::ofstream>(options.metrics);
    if (!*metrics)
      throw megrt::Error("cannot write the metrics file '" + options.metrics +
                         "'");
  }
  std::vector<double> times;
  int64_t skipped = 0;
  auto saveMetadata = [&] {
    std::map<std::string, std::string> metadata;
    if (data) {
      metadata[kDataPositionKey] = std::to_string(data->position());
      metadata[kDataOrderKey] = dataOrderText(dataSeed);
    }
    return metadata;
  };
  auto saveState = [&](const std::string &path) {
    session.saveState(path, saveMetadata());
  };
  auto startSave = [&](const std::string &path) {
    session.startSaveState(path, saveMetadata());
  };
  // A checkpoint that cannot be written stops the run, or with
  // --on-save-error warn is reported and training goes on (every rank
  // gets the same error, so all go on together).
  auto guardSave = [&](const std::function<void()> &save) {
    try {
      save();
    } catch (const megrt::Error &error) {
      if (!options.warnOnSaveError)
        throw;
      if (lead)
        std::cerr << "megc-run: warning: " << error.what()
                  << "; training goes on (--on-save-error warn), the newest "
                     "complete checkpoint stays the last good one"
                  << std::endl;
    }
  };
  // --keep: only complete checkpoints count, and only once a newer one is.
  megrt::CheckpointDirectory saveDir(options.saveDir);
  auto removeOldCheckpoints = [&] {
    if (lead && options.keep)
      saveDir.keepNewest(options.keep);
  };
  if (options.saveEvery && lead) {
    std::filesystem::create_directories(options.saveDir);
    if (int removed = saveDir.removeUnfinished())
      std::cout << "megc-run: removed " << removed
                << " unfinished checkpoint file(s) of an earlier run from '"
                << options.saveDir << "'" << std::endl;
  }
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    if (data)
      data->next(rows, inputs["input_ids"], inputs["labels"]);
    auto start = std::chrono::steady_clock::now();
    // Into the same map every step, so no output storage is allocated after
    // the first: fresh storage for a llama forward's 16 MB of logits cost
    // about 7 ms of page faults per step on the CPU.
    session.run(options.entry, inputs, outputs);
    // train_step counts its non-finite loss and gradient norm (over every
    // rank) and then skips its updates; other entries are checked here.
    auto scalarOutput = [&](const char *name) -> std::optional<float> {
      auto it = outputs.find(name);
      if (it == outputs.end() || it->second.numElements() != 1 ||
          it->second.dtype() != megrt::DType::F32)
        return std::nullopt;
      return *it->second.dataAs<float>();
    };
    std::optional<float> nonfinite = scalarOutput("nonfinite");
    bool bad = nonfinite ? *nonfinite != 0.0f : false;
    std::string values;
    for (const char *name : {"loss", "grad_norm"})
      if (auto it = outputs.find(name); it != outputs.end()) {
        std::optional<float> scalar = scalarOutput(name);
        if (!scalar)
          continue;
        bad |= !std::isfinite(*scalar);
        values += (values.empty() ? "" : ", ") + std::string(name) + " " +
                  scalarText(it->second);
      }
    // By default a non-finite step ends the run before anything is saved
    // from it: the checkpoints on disk stay the last good state.
    if (bad && !(options.skipNonfinite && nonfinite))
      throw megrt::Error(
          "non-finite loss (or gradient norm) at step " +
          std::to_string(step) + " of entry '" + options.entry + "' (" +
          values + ")" +
          (nonfinite ? "; its update was skipped" : "") +
          "; nothing of this step or after is saved" +
          (options.saveEvery ? ", the last checkpoint in '" +
                                   options.saveDir + "' is the last good state"
                             : "") +
          (nonfinite ? " (--skip-nonfinite skips such steps and goes on)"
                     : ""));
    if (bad)
      ++skipped;
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    times.push_back(ms);
    if (metrics) {
      // JSON has no NaN or infinities: those are written as strings.
      *metrics << "{\"step\":" << step << ",\"entry_ms\":" << ms;
      for (const auto &[name, tensor] : outputs) {
        std::string scalar = scalarText(tensor, 9);
        if (scalar.empty())
          continue;
        bool number = scalar.find_first_of("NI") == std::string::npos;
        *metrics << ",\"" << name << "\":" << (number ? "" : "\"") << scalar
                 << (number ? "" : "\"");
      }
      if (std::optional<double> lr = session.learningRate()) {
        char text[32];
        std::snprintf(text, sizeof(text), "%.9g", *lr);
        *metrics << ",\"lr\":" << text;
      }
      if (data)
        *metrics << ",\"tokens_per_s\":"
                 << static_cast<double>(rows * data->seq()) / (ms / 1000.0);
      // Every rank runs the entry's FLOPs on its part of the batch.
      if (const megrt::EntrySpec *spec = program.findEntry(options.entry);
          spec && spec->flops)
        *metrics << ",\"tflops\":"
                 << static_cast<double>(spec->flops) * session.worldSize() /
                        (ms * 1e9);
      *metrics << "}\n";
      metrics->flush();
    }
    if (lead && (step % options.logEvery == 0 || step == options.steps)) {
      // Rates first and outputs last, so that the loss ends the line.
      std::cout << "step " << step << "/" << options.steps << " "
                << options.entry << " " << ms << " ms";
      if (std::optional<double> lr = session.learningRate())
        std::cout << " lr " << *lr;
      if (options.skipNonfinite)
        std::cout << " skipped " << skipped;
      // Training on --data: throughput, and the model FLOPs' rate.
      const megrt::EntrySpec *spec = program.findEntry(options.entry);
      if (data)
        std::cout << " tok/s "
                  << static_cast<int64_t>(static_cast<double>(rows) *
                                          data->seq() / (ms / 1000.0));
      if (data && spec->flops)
        std::cout << " TFLOP/s "
                  << static_cast<double>(spec->flops) * session.worldSize() /
                         (ms * 1e9);
      for (const auto &[name, tensor] : outputs) {
        std::string scalar = scalarText(tensor);
        // The skipped steps' count stands for it, before the outputs.
        if (!scalar.empty() && name != "nonfinite")
          std::cout << " " << name << " " << scalar;
      }
      std::cout << std::endl;
    }
    // A save in flight that failed is reported at the step boundary after
    // its writer stopped (one rank; under a mesh the next save or the end
    // reports it on every rank at once).
    if (options.asyncSave && session.worldSize() == 1)
      guardSave([&] {
        try {
          session.checkSave();
        } catch (const megrt::Error &) {
          session.finishSave(); // throws the same error, and forgets it
        }
      });
    if (options.saveEvery && step % options.saveEvery == 0) {
      // Several ranks write distributed checkpoints, each its own pieces.
      bool distributed = session.worldSize() > 1;
      std::string path = saveDir.pathOf(step, distributed);
      auto saveStart = std::chrono::steady_clock::now();
      if (options.asyncSave) {
        // The one before is completed first, and only then old ones go.
        guardSave([&] { session.finishSave(); });
        removeOldCheckpoints();
        guardSave([&] { startSave(path); });
      } else {
        guardSave([&] {
          saveState(path);
          removeOldCheckpoints();
        });
      }
      // What the step waited for: the whole save, or (--async-save) the
      // one before's end and the copy of this one.
      if (lead && (step % options.logEvery == 0 || step == options.steps))
        std::cout << "megc-run: " << (options.asyncSave ? "saving " : "saved ")
                  << path << " (the step waited " << std::fixed
                  << std::setprecision(3)
                  << std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - saveStart)
                         .count()
                  << " s)" << std::defaultfloat << std::endl;
    }
    // Every rank evaluates: the loss entry communicates.
    if (evalData && options.evalEvery && step % options.evalEvery == 0)
      evaluate(step);
  }
  if (evalData && (!options.evalEvery || options.steps % options.evalEvery))
    evaluate(options.steps);
  guardSave([&] {
    if (!session.finishSave().empty())
      removeOldCheckpoints();
  });
  if (lead && options.skipNonfinite)
    std::cout << "skipped steps: " << skipped << " of " << times.size()
              << " (a non-finite loss or gradient norm; their updates did "
                 "not run)"
              << std::endl;
  if (lead && times.size() > 1)
    std::cout << "median step ms: " << median(times) << " (" << times.size()
              << " steps)" << std::endl;
  if (lead && options.device == "cpu")
    if (const megrt::EntrySpec *spec = program.findEntry(options.entry)) {
      // The plan's promise: the entry's arena next to the parameters and
      // state; the rest is its inputs, outputs and kernel scratch.
      // Rank 0 of a pipeline holds its stages' parameters and the shared
      // ones (its index in every group is 0).
      uint64_t state = 0;
      for (const megrt::ParameterSpec &param : program.parameters())
        if (param.pipelineOwner <= 0)
          state += megrt::byteSize(param.dtype, param.shape, param.name);
      std::cout << "host memory: peak " << mb(megrt::hostMemory().peak)
                << " MB while running; plan " << mb(spec->plan.arenaBytes + state)
                << " MB (arena " << mb(spec->plan.arenaBytes)
                << " MB + parameters and state " << mb(state) << " MB)"
                << std::endl;
    }
  if (lead && !options.outputDir.empty()) {
    std::filesystem::create_directories(options.outputDir);
    for (const auto &[name, tensor] : outputs)
      megrt::writeNpy(options.outputDir + "/" + name + ".npy", tensor);
  }
  if (!options.saveParams.empty())
    session.saveParameters(options.saveParams, options.maxShardBytes);
  if (!options.saveState.empty())
    saveState(options.saveState);
  // Written here rather than by the Session's destructor, so that a trace
  // that cannot be written is an error. Each rank writes its own.
  if (!options.trace.empty())
    session.writeTrace();
  return 0;
}

/// Prints the error of this rank ("rank N: " first when the launcher
/// started several) and ends the process. A rank of a multi-rank run exits
/// at once, without finalising MPI, which would wait for peers that wait
/// for this rank: mpirun then ends the job.
[[noreturn]] void exitWithError(const megrt::LaunchedRank &launched,
                                const char *message) {
  std::string prefix =
      launched.size > 1 ? "rank " + std::to_string(launched.rank) + ": " : "";
  std::cout.flush();
  // One write, so that the ranks' lines do not interleave.
  std::string text = message;
  // Messages of the communicators name the rank already.
  if (!prefix.empty() && text.rfind(prefix, 0) == 0)
    text = text.substr(prefix.size());
  std::string line = prefix + "megc-run: error: " + text + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (launched.size > 1)
    std::_Exit(1);
  std::exit(1);
}

} // namespace

int main(int argc, char **argv) {
  Options options = parse(argc, argv);
  megrt::LaunchedRank launched;
  try {
    launched = megrt::launchedRank();
  } catch (const std::exception &error) {
    exitWithError(launched, error.what());
  }
  try {
    return run(options, launched);
  } catch (const std::exception &error) {
    exitWithError(launched, error.what());
  }
}
