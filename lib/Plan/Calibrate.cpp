//===- Calibrate.cpp - a cluster's efficiencies from a measured run ------===//
//
// The trace's complete events ("ph": "X") that carry a command index give
// each command's measured time. Memory-bound commands fit the fixed cost
// of a command and the achieved memory bandwidth by least squares; matrix
// products fit their size curve (the half-efficiency size, over a grid)
// and their efficiency; attention and collectives fit their efficiency
// from the totals, less the fixed costs.
//
//===----------------------------------------------------------------------===//

#include "megc/Plan/Calibrate.h"
#include "megc/Plan/Simulate.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace llvm;

namespace megc::plan {
namespace {

/// The trace category of a command, as megrt's trace labels name it.
StringRef categoryOf(const Command &command) {
  if (std::holds_alternative<GemmCommand>(command))
    return "gemm";
  if (std::holds_alternative<AttentionCommand>(command))
    return "attention";
  if (std::holds_alternative<LaunchCommand>(command))
    return "kernel";
  if (std::holds_alternative<LibraryCallCommand>(command))
    return "library";
  if (std::holds_alternative<CopyCommand>(command))
    return "copy";
  return "collective";
}

/// Each command's mean measured time in seconds, checked against the
/// entry: the trace's runs of it have its number of commands, each of the
/// kind the entry has there.
Expected<std::map<uint32_t, double>>
measuredTimes(StringRef text, StringRef name, const EntryDesc &entry) {
  Expected<json::Value> value = json::parse(text);
  if (!value)
    return createStringError(
        formatv("{0}: not JSON: {1}", name, toString(value.takeError())).str());
  const json::Array *events = nullptr;
  if (const json::Object *root = value->getAsObject())
    events = root->getArray("traceEvents");
  else
    events = value->getAsArray();
  if (!events)
    return createStringError(
        formatv("{0}: expected a Chrome trace (traceEvents)", name).str());
  auto otherArtifact = [&](const Twine &why) {
    return createStringError(
        formatv("{0}: the trace is of another artifact than entry '{1}' of "
                "this model compiled with plan's options ({2})",
                name, entry.name, why.str())
            .str());
  };
  std::map<uint32_t, std::pair<double, int64_t>> sums;
  for (const json::Value &item : *events) {
    const json::Object *event = item.getAsObject();
    if (!event || event->getString("ph") != "X")
      continue;
    const json::Object *args = event->getObject("args");
    if (event->getString("cat") == "entry") {
      std::optional<int64_t> commands =
          args ? args->getInteger("commands") : std::nullopt;
      if (event->getString("name") == entry.name && commands &&
          *commands != static_cast<int64_t>(entry.commands.size()))
        return otherArtifact(formatv("its run of '{0}' has {1} commands, "
                                     "this one {2}",
                                     entry.name, *commands,
                                     entry.commands.size()));
      continue;
    }
    std::optional<int64_t> command =
        args ? args->getInteger("command") : std::nullopt;
    std::optional<double> duration = event->getNumber("dur");
    if (!command || !duration || *command < 0)
      continue;
    if (*command >= static_cast<int64_t>(entry.commands.size()))
      return otherArtifact(formatv("command {0} is beyond its {1} commands",
                                   *command, entry.commands.size()));
    StringRef expected = categoryOf(entry.commands[*command]);
    if (std::optional<StringRef> category = event->getString("cat");
        category && *category != expected)
      return otherArtifact(formatv("command {0} is a {1} there and a {2} "
                                   "here",
                                   *command, *category, expected));
    auto &[total, runs] = sums[static_cast<uint32_t>(*command)];
    total += *duration * 1e-6;
    ++runs;
  }
  if (sums.empty())
    return createStringError(
        formatv("{0}: no command events (write it with megc-run --trace "
                "from the artifact of the same model and options)",
                name)
            .str());
  std::map<uint32_t, double> means;
  for (const auto &[command, sum] : sums)
    means[command] = sum.first / static_cast<double>(sum.second);
  return means;
}

struct Sample {
  CommandCost cost;
  double seconds;
};

} // namespace

Expected<Calibration> calibrate(const Cluster &cluster,
                                const ProgramDesc &program,
                                const EntryDesc &entry, StringRef traceText,
                                StringRef traceName) {
  Expected<std::map<uint32_t, double>> measured =
      measuredTimes(traceText, traceName, entry);
  if (!measured)
    return measured.takeError();
  std::map<CostClass, std::vector<Sample>> samples;
  for (const auto &[index, seconds] : *measured) {
    CommandCost cost = commandCost(program, entry, index, cluster);
    samples[cost.cls].push_back({cost, seconds});
  }
  Calibration result{cluster, {}};
  Cluster &c = result.cluster;
  Cluster::Efficiency &e = c.efficiency;
  auto note = [&](const Twine &line) { result.notes.push_back(line.str()); };

  // Memory-bound commands: seconds = launch + bytes / (bandwidth x e).
  if (const auto &memory = samples[CostClass::Memory]; memory.size() >= 2) {
    double n = memory.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const Sample &s : memory) {
      sx += s.cost.work, sy += s.seconds;
      sxx += s.cost.work * s.cost.work, sxy += s.cost.work * s.seconds;
    }
    double slope = (n * sxy - sx * sy) / std::max(n * sxx - sx * sx, 1e-300);
    double launch = (sy - slope * sx) / n;
    if (launch < 0 || slope <= 0) {
      launch = std::max(0.0, launch);
      slope = std::max(sy - n * launch, 1e-300) / std::max(sx, 1.0);
    }
    e.launchSeconds = launch;
    double bandwidth = 1.0 / slope;
    e.memory = bandwidth / c.device.memoryBandwidth;
    note(formatv("memory: {0} commands, {1:f2} GB/s achieved, {2:f2} us per "
                 "command",
                 memory.size(), bandwidth / 1e9, launch * 1e6));
  } else {
    note("memory: too few commands to fit; kept");
  }
  // An efficiency above 1 means the file's peak was low: the peak rises.
  auto settle = [&](double &efficiency, double &peak, const char *what) {
    if (efficiency > 1.0) {
      note(formatv("{0}: measured above the file's peak; peak raised {1:f2}x",
                   what, efficiency));
      peak *= efficiency;
      efficiency = 1.0;
    }
  };
  settle(e.memory, c.device.memoryBandwidth, "memory bandwidth");

  // Matrix products: seconds = launch + (work + half) / (peak x e).
  if (const auto &gemms = samples[CostClass::Gemm]; !gemms.empty()) {
    double bestError = HUGE_VAL, bestHalf = 0, bestInverse = 1;
    for (double half :
         {0.0, 1e3, 1e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7, 1e8, 3e8, 1e9}) {
      double aa = 0, ab = 0;
      for (const Sample &s : gemms) {
        double a = (s.cost.work + half) / c.peakFor(s.cost.dtype);
        double b = std::max(s.seconds - e.launchSeconds, 0.0);
        aa += a * a, ab += a * b;
      }
      double inverse = ab / std::max(aa, 1e-300);
      double error = 0;
      for (const Sample &s : gemms) {
        double predicted = e.launchSeconds + inverse * (s.cost.work + half) /
                                                 c.peakFor(s.cost.dtype);
        error += (predicted - s.seconds) * (predicted - s.seconds);
      }
      if (inverse > 0 && error < bestError)
        bestError = error, bestHalf = half, bestInverse = inverse;
    }
    e.gemm = 1.0 / bestInverse;
    e.gemmHalfFlops = bestHalf;
    if (e.gemm > 1.0) {
      note(formatv("gemm: measured above the file's peak; peaks raised "
                   "{0:f2}x",
                   e.gemm));
      for (auto &[dtype, peak] : c.device.peakFlops)
        peak *= e.gemm;
      e.gemm = 1.0;
    }
    note(formatv("gemm: {0} commands, efficiency {1:f3}, half at {2:e} FLOPs",
                 gemms.size(), e.gemm, e.gemmHalfFlops));
  } else {
    note("gemm: none in the trace; kept");
  }

  // The others from their totals: measured = launch + fixed + ideal / e,
  // as commandSeconds costs them.
  auto fitTotal = [&](const std::vector<Sample> &list, double &efficiency,
                      const char *what, auto ideal, auto fixed) {
    if (list.empty()) {
      note(formatv("{0}: none in the trace; kept", what));
      return;
    }
    double idealSeconds = 0, measuredSeconds = 0;
    for (const Sample &s : list) {
      idealSeconds += ideal(s.cost);
      measuredSeconds +=
          std::max(s.seconds - e.launchSeconds - fixed(s.cost), 1e-12);
    }
    efficiency = idealSeconds / measuredSeconds;
    note(formatv("{0}: {1} commands, efficiency {2:f3}", what, list.size(),
                 efficiency));
  };
  auto none = [](const CommandCost &) { return 0.0; };
  fitTotal(
      samples[CostClass::Attention], e.attention, "attention",
      [&](const CommandCost &cost) {
        return cost.work / c.peakFor(cost.dtype);
      },
      none);
  if (e.attention > 1.0) {
    note(formatv("attention: measured above the f32 peak; efficiency "
                 "capped at 1 ({0:f2})",
                 e.attention));
    e.attention = 1.0;
  }
  std::vector<Sample> intra, inter;
  for (const Sample &s : samples[CostClass::Collective])
    (s.cost.intraNode ? intra : inter).push_back(s);
  fitTotal(
      intra, e.intraNode, "collectives inside a node",
      [&](const CommandCost &cost) { return cost.work / c.node.linkBandwidth; },
      [&](const CommandCost &cost) {
        return static_cast<double>(cost.steps) * c.node.linkLatency;
      });
  settle(e.intraNode, c.node.linkBandwidth, "link bandwidth");
  fitTotal(
      inter, e.interNode, "collectives across nodes",
      [&](const CommandCost &cost) { return cost.work / c.network.bandwidth; },
      [&](const CommandCost &cost) {
        return static_cast<double>(cost.steps) * c.network.latency;
      });
  settle(e.interNode, c.network.bandwidth, "network bandwidth");
  c.name += " (calibrated)";
  return result;
}

} // namespace megc::plan
