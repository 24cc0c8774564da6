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
//===----------------------------------------------------------------------===//

#include "megrt/Error.h"
#include "megrt/Npy.h"
#include "megrt/Session.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    "usage: megc-run MODEL.megc --entry NAME [--device cpu|cuda[:N]]\n"
    "                [--params init[:SEED]|FILE.safetensors|HF-DIR]\n"
    "                [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
    "                [--steps N] [--save-params FILE.safetensors|HF-DIR/]\n"
    "                [--max-shard-size SIZE]\n"
    "                [--save-state FILE.safetensors] [--load-state FILE]\n"
    "                [--allow-extra-params] [--warmup N] [--no-cuda-graphs]\n"
    "                [--trace FILE.json] [--comm-timeout SECONDS]\n"
    "                [--threads N]\n";

struct Options {
  std::string model, entry, device = "cpu", params = "init", outputDir;
  std::string saveParams, saveState, loadState, trace;
  std::map<std::string, std::string> inputs;
  int64_t steps = 1;
  int64_t warmup = 0;
  /// Shards of a --save-params directory (transformers' default, 50 GB).
  uint64_t maxShardBytes = 50'000'000'000;
  double commTimeoutSeconds = 300;
  bool allowExtraParams = false;
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
      options.inputs[text.substr(0, equals)] = text.substr(equals + 1);
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
  return options;
}

/// A one-line rendering of a scalar output, or empty for larger tensors.
std::string scalarText(const megrt::Tensor &tensor) {
  if (tensor.numElements() != 1 || tensor.dtype() != megrt::DType::F32)
    return "";
  char text[64];
  std::snprintf(text, sizeof(text), "%.6g", *tensor.dataAs<float>());
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
  bool init = options.params == "init" || options.params.rfind("init:", 0) == 0;
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
  megrt::Session session(program, sessionOptions);
  // Every rank runs the same calls (the Session communicates); rank 0
  // alone reports and writes files.
  bool lead = session.rank() == 0;
  if (lead && session.worldSize() > 1)
    std::cout << "megc-run: " << session.worldSize() << " ranks, mesh "
              << program.describeMesh() << std::endl;
  if (!init)
    session.loadParameters(options.params, options.allowExtraParams);
  if (!options.loadState.empty())
    session.loadState(options.loadState);

  std::map<std::string, megrt::Tensor> inputs;
  for (const auto &[name, path] : options.inputs)
    inputs[name] = megrt::readNpy(path);

  std::map<std::string, megrt::Tensor> outputs;
  // Warm-up steps take the first run's costs (allocation, graph capture)
  // out of the timed ones.
  for (int64_t step = 0; step < options.warmup; ++step)
    outputs = session.run(options.entry, inputs);
  std::vector<double> times;
  for (int64_t step = 1; step <= options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    outputs = session.run(options.entry, inputs);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    times.push_back(ms);
    if (!lead)
      continue;
    std::cout << "step " << step << "/" << options.steps << " " << options.entry
              << " " << ms << " ms";
    for (const auto &[name, tensor] : outputs) {
      std::string scalar = scalarText(tensor);
      if (!scalar.empty())
        std::cout << " " << name << " " << scalar;
    }
    std::cout << std::endl;
  }
  if (lead && times.size() > 1)
    std::cout << "median step ms: " << median(times) << " (" << times.size()
              << " steps)" << std::endl;
  if (lead && !options.outputDir.empty()) {
    std::filesystem::create_directories(options.outputDir);
    for (const auto &[name, tensor] : outputs)
      megrt::writeNpy(options.outputDir + "/" + name + ".npy", tensor);
  }
  if (!options.saveParams.empty())
    session.saveParameters(options.saveParams, options.maxShardBytes);
  if (!options.saveState.empty())
    session.saveState(options.saveState);
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
  std::cerr << prefix << "megc-run: error: " << message << std::endl;
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
